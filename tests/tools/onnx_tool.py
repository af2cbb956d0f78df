"""Test helper for the `smelt import` lit tests: turns an ONNX node test's input .pb files into
.npy files with the `--input` flags of `smelt run`, checks `smelt run`'s .npy results against
the test's expected output .pb files at ONNX's tolerance (rtol 1e-3, atol 1e-7), and writes
models for the error tests (an unsupported op, a truncated file)."""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def load(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def numbered(dir, prefix):
    files, i = [], 0
    while os.path.exists(f"{dir}/{prefix}_{i}.pb"):
        files.append(f"{dir}/{prefix}_{i}.pb")
        i += 1
    return files


def graph_of(test):
    return onnx.load(f"{test}/model.onnx").graph


def inputs(test, out):
    """Writes each input of test_data_set_0 as out/<name>.npy; prints the --input flags."""
    graph = graph_of(test)
    initialized = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in initialized]
    os.makedirs(out, exist_ok=True)
    flags = []
    for name, path in zip(names, numbered(f"{test}/test_data_set_0", "input")):
        np.save(f"{out}/{name}.npy", load(path))
        flags.append(f"--input {name}={out}/{name}.npy")
    print(" ".join(flags))


def compare(test, out):
    """Each expected output of test_data_set_0 against out/<name>.npy."""
    graph = graph_of(test)
    for info, path in zip(graph.output, numbered(f"{test}/test_data_set_0", "output")):
        want, got = load(path), np.load(f"{out}/{info.name}.npy")
        assert got.shape == want.shape, (info.name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7, err_msg=info.name)
        print(f"{info.name} OK {list(got.shape)}")


def unsupported_op(path):
    """A model whose second node (NonZero: its result's shape depends on the data) Smelt does
    not map."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node("NonZero", ["r"], ["i"], name="find_nonzero")]
    outs = [helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [2, None])]
    graph = helper.make_graph(nodes, "g", [x], outs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def symbolic(path):
    """Relu of x [N, 4], N symbolic: needs --input-shape."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv_pool(path):
    """Conv then MaxPool, NCHW, with the filter an initializer: their layout transposes cancel."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])
    w = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, np.float32), "conv.weight")
    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 4, 4])
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def grouped_conv(out, groups):
    """Conv with `groups` groups (16 channels: 2 is grouped, 16 depthwise), strided and padded,
    fresh random input and filter, and its expected output from float64 loops written here:
    out/model.onnx, out/x.npy, out/expected.npy."""
    groups = int(groups)
    rng = np.random.default_rng()
    c, f, h = 16, 16 if groups == 16 else 8, 9
    x = rng.uniform(-1, 1, (2, c, h, h)).astype(np.float32)
    w = rng.uniform(-1, 1, (f, c // groups, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, f).astype(np.float32)
    oh = (h + 2 - 3) // 2 + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((2, f, oh, oh))
    cg, fg = c // groups, f // groups
    for o in range(f):
        k = o // fg
        for i in range(cg):
            for ky in range(3):
                for kx in range(3):
                    y[:, o] += w[o, i, ky, kx] * xp[:, k * cg + i, ky:ky + 2 * oh:2, kx:kx + 2 * oh:2]
        y[:, o] += b[o]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=groups, strides=[2, 2],
                            pads=[1, 1, 1, 1], name="grouped")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, y.shape)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              f"{out}/model.onnx")
    np.save(f"{out}/x.npy", x)
    np.save(f"{out}/expected.npy", y)


def gather_embedding(out):
    """Two Gathers with run-time indices, some negative: rows of a [5000, 16] embedding table
    at ids [4, 16] (axis 0), and entries of x [3, 50, 5] at idx [2, 7] along axis 1; fresh
    random data, expected outputs from numpy's take: out/model.onnx, out/{table,ids,x,idx}.npy,
    out/{emb,picked}.expected.npy."""
    rng = np.random.default_rng()
    table = rng.uniform(-1, 1, (5000, 16)).astype(np.float32)
    ids = rng.integers(-5000, 5000, (4, 16)).astype(np.int64)
    x = rng.uniform(-1, 1, (3, 50, 5)).astype(np.float32)
    idx = rng.integers(-50, 50, (2, 7)).astype(np.int64)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0, name="embed"),
             helper.make_node("Gather", ["x", "idx"], ["picked"], axis=1, name="pick")]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "g",
        [info("table", onnx.TensorProto.FLOAT, table.shape),
         info("ids", onnx.TensorProto.INT64, ids.shape),
         info("x", onnx.TensorProto.FLOAT, x.shape),
         info("idx", onnx.TensorProto.INT64, idx.shape)],
        [info("emb", onnx.TensorProto.FLOAT, [4, 16, 16]),
         info("picked", onnx.TensorProto.FLOAT, [3, 2, 7, 5])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              f"{out}/model.onnx")
    for name, value in [("table", table), ("ids", ids), ("x", x), ("idx", idx),
                        ("emb.expected", np.take(table, ids, axis=0)),
                        ("picked.expected", np.take(x, idx, axis=1))]:
        np.save(f"{out}/{name}.npy", value)


def lrn_wide(out):
    """LRN over [2, 5, 3, 3] with a window of 4,194,303 channels (the ONNX fuzzer's size, which
    the importer once built as that many slices) and of 3, on fresh random data; expected
    outputs from ONNX's definition in float64: out/model.onnx, out/x.npy,
    out/{wide,narrow}.expected.npy."""
    rng = np.random.default_rng()
    x = rng.uniform(-2, 2, (2, 5, 3, 3)).astype(np.float32)
    alpha, beta, bias = 0.001, 0.75, 2.0

    def lrn(size):
        sq = x.astype(np.float64) ** 2
        total = np.zeros_like(sq)
        for c in range(x.shape[1]):
            lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + size - 1 - (size - 1) // 2)
            total[:, c] = sq[:, lo:hi + 1].sum(axis=1)
        return x / (bias + alpha / size * total) ** beta

    info = helper.make_tensor_value_info
    nodes = [helper.make_node("LRN", ["x"], ["wide"], size=4194303, alpha=alpha, beta=beta,
                              bias=bias),
             helper.make_node("LRN", ["x"], ["narrow"], size=3, alpha=alpha, beta=beta,
                              bias=bias)]
    graph = helper.make_graph(nodes, "g", [info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [info("wide", onnx.TensorProto.FLOAT, x.shape),
                               info("narrow", onnx.TensorProto.FLOAT, x.shape)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              f"{out}/model.onnx")
    for name, value in [("x", x), ("wide.expected", lrn(4194303)), ("narrow.expected", lrn(3))]:
        np.save(f"{out}/{name}.npy", value)


def save_case(out, graph, arrays, expected):
    """`graph` as out/model.onnx (opset 13, checked), each of `arrays` as out/<name>.npy and
    each of `expected` as out/expected/<name>.npy."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(f"{out}/expected", exist_ok=True)
    onnx.save(model, f"{out}/model.onnx")
    for name, value in arrays.items():
        np.save(f"{out}/{name}.npy", value)
    for name, value in expected.items():
        np.save(f"{out}/expected/{name}.npy", value)


def compare_npy(got, expected):
    """`smelt run`'s result against an expected .npy at ONNX's tolerance."""
    g, e = np.load(got).astype(np.float64), np.load(expected)
    if g.shape != e.shape:
        sys.exit(f"MISMATCH: shape {list(g.shape)}, expected {list(e.shape)}")
    ok = np.allclose(g, e, rtol=1e-3, atol=1e-5)
    print(f"{'OK' if ok else 'MISMATCH'} {list(g.shape)} max error {np.max(np.abs(g - e)):.2e}")
    sys.exit(0 if ok else 1)


def malformed(path):
    """A Cast without its 'to' attribute (onnx.checker would refuse it; the importer must too)."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], name="c")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def missing_input(path, op):
    """`op` (Gather or Concat) of a graph input with too few inputs: Gather with its data only,
    Concat with none."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2])
    inputs = ["x"] if op == "Gather" else []
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], name="short")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def claims_too_much(path):
    """An initializer whose dims claim 2^39 floats, with 12 bytes of data."""
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2 ** 39])
    init = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[2 ** 39],
                            raw_data=b"\0" * 12)  # helper.make_tensor refuses the mismatch
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [y], [init])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def invalid_models(out):
    """Models onnx.checker or ONNX Runtime refuse, which the importer used to take: an unknown
    attribute, an extra input, Unsqueeze-13 without its axes input, outputs declared of
    another element type or shape than the graph computes, a MatMul of a scalar and a ScatterND
    into data with no rows."""
    info = helper.make_tensor_value_info
    x = info("x", onnx.TensorProto.FLOAT, [2, 3])
    cases = {
        "unknown_attribute": ([helper.make_node("Relu", ["x"], ["y"], alpha=1.0)],
                              info("y", onnx.TensorProto.FLOAT, [2, 3])),
        "extra_input": ([helper.make_node("Relu", ["x", "x"], ["y"])],
                        info("y", onnx.TensorProto.FLOAT, [2, 3])),
        "unsqueeze_no_axes": ([helper.make_node("Unsqueeze", ["x"], ["y"])],
                              info("y", onnx.TensorProto.FLOAT, [1, 2, 3])),
        "wrong_type": ([helper.make_node("Relu", ["x"], ["y"])],
                       info("y", onnx.TensorProto.INT64, [2, 3])),
        "wrong_shape": ([helper.make_node("Relu", ["x"], ["y"])],
                        info("y", onnx.TensorProto.FLOAT, [3, 2])),
    }
    for name, (nodes, y) in cases.items():
        graph = helper.make_graph(nodes, "g", [x], [y])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                  f"{out}/{name}.onnx")
    # MatMul of a scalar (the ONNX fuzzer's first finding: the importer read before the
    # shape's start).
    graph = helper.make_graph([helper.make_node("MatMul", ["s", "x"], ["y"])], "g",
                              [info("s", onnx.TensorProto.FLOAT, []), x],
                              [info("y", onnx.TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              f"{out}/scalar_matmul.onnx")
    # ScatterND into data with no rows (the second: a division by the data's row count).
    ids = helper.make_tensor("ids", onnx.TensorProto.INT64, [1, 1], [0])
    graph = helper.make_graph([helper.make_node("ScatterND", ["d", "ids", "u"], ["y"])], "g",
                              [info("d", onnx.TensorProto.FLOAT, [0, 3]),
                               info("u", onnx.TensorProto.FLOAT, [1, 3])],
                              [info("y", onnx.TensorProto.FLOAT, [0, 3])], [ids])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              f"{out}/scatternd_no_rows.onnx")


def uint32_input(path):
    """Relu of a uint32 input: a dtype Smelt does not have (8- and 16-bit integers it carries
    as int32)."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.UINT32, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.UINT32, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def truncate(src, dst, fraction):
    data = open(src, "rb").read()
    open(dst, "wb").write(data[: int(len(data) * float(fraction))])


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"inputs": inputs, "compare": compare, "unsupported-op": unsupported_op,
     "symbolic": symbolic, "conv-pool": conv_pool, "grouped-conv": grouped_conv,
     "compare-npy": compare_npy, "gather-embedding": gather_embedding, "lrn-wide": lrn_wide,
     "malformed": malformed, "uint32-input": uint32_input, "truncate": truncate,
     "missing-input": missing_input, "claims-too-much": claims_too_much,
     "invalid-models": invalid_models}[command](*args)
