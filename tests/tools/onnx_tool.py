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


def malformed(path):
    """A Cast without its 'to' attribute (onnx.checker would refuse it; the importer must too)."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], name="c")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def uint8_input(path):
    """Relu of a uint8 input: a dtype Smelt does not have."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.UINT8, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.UINT8, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def truncate(src, dst, fraction):
    data = open(src, "rb").read()
    open(dst, "wb").write(data[: int(len(data) * float(fraction))])


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"inputs": inputs, "compare": compare, "unsupported-op": unsupported_op,
     "symbolic": symbolic, "conv-pool": conv_pool,
     "malformed": malformed, "uint8-input": uint8_input, "truncate": truncate}[command](*args)
