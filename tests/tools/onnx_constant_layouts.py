"""Test helper for tests/tools/smelt-import-constants.test: an ONNX model whose weights change
layout before use, as exporters write them (a Conv's OIHW filter that Smelt reads as HWIO, an
LM head tied to the embedding table through a Transpose, a Reshape and a Cast of a weight),
with fresh random weights, some large enough to be kept as dense_resource blobs.

    onnx_constant_layouts.py write DIR [SEED [other-table]]
                                             DIR/model.onnx, DIR/{x,ids}.npy, DIR/expected/*.npy
                                             (other-table: the same but for the table's values)
    onnx_constant_layouts.py check-ir FILE   no transpose, reshape or convert of a constant left
                                             in FILE (the module after canonicalization)
    onnx_constant_layouts.py compare DIR OUT each OUT/<output>.npy against DIR/expected: the
                                             weights' layout changes exactly, the rest at 1e-5
                                             (relative, and of the largest value)
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_tool import save_case

VOCAB, WIDTH = 300, 256  # 76,800 elements: past the 65,536 kept as known values


def conv2d(x, w, b):
    """NCHW convolution, stride 1, padding 1, in float64."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    out = np.zeros((n, f, h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,fc->nfhw", padded[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out + b[None, :, None, None]


def write(out, seed=None, other_table=False):
    """With `seed` and `other_table`, the model of that seed but for another `wte`."""
    seed = int(seed) if seed else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ids = rng.integers(0, VOCAB, (2, 5)).astype(np.int64)
    weights = {
        "conv.weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "conv.bias": rng.standard_normal(4).astype(np.float32),
        "wte": rng.standard_normal((VOCAB, WIDTH)).astype(np.float32),
        "small": rng.standard_normal((16, 8)).astype(np.float32),
    }
    if other_table:
        weights["wte"] = np.random.default_rng(seed + 1).standard_normal((VOCAB, WIDTH)).astype(np.float32)
    shape = numpy_helper.from_array(np.array([WIDTH, VOCAB], np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["features"]),
        helper.make_node("Gather", ["wte", "ids"], ["embedded"]),
        helper.make_node("Transpose", ["wte"], ["wte_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["embedded", "wte_t"], ["logits"]),
        helper.make_node("Identity", ["wte_t"], ["head"]),
        helper.make_node("Reshape", ["wte", "shape"], ["wte_reshaped"]),
        helper.make_node("Cast", ["small"], ["small_half"], to=TensorProto.FLOAT16),
    ]
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    embedded = w["wte"][ids]
    expected = {
        "features": np.maximum(conv2d(x.astype(np.float64), w["conv.weight"], w["conv.bias"]), 0),
        "logits": embedded @ w["wte"].T,
        "head": weights["wte"].T,
        "wte_reshaped": weights["wte"].reshape(WIDTH, VOCAB),
        "small_half": weights["small"].astype(np.float16),
    }
    info = helper.make_tensor_value_info
    outputs = [info(name, TensorProto.FLOAT16 if value.dtype == np.float16 else TensorProto.FLOAT,
                    value.shape) for name, value in expected.items()]
    graph = helper.make_graph(
        nodes, "layouts", [info("x", TensorProto.FLOAT, x.shape), info("ids", TensorProto.INT64, ids.shape)],
        outputs, [numpy_helper.from_array(v, k) for k, v in weights.items()] + [shape])
    save_case(out, graph, {"x": x, "ids": ids}, expected)


def check_ir(path):
    """No smelt.transpose, reshape or convert whose operand is a smelt.constant."""
    constants, bad = set(), []
    for line in open(path):
        if m := re.match(r"\s*(%\S+) = smelt\.constant ", line):
            constants.add(m.group(1))
        elif m := re.match(r"\s*%\S+ = smelt\.(transpose|reshape|convert) (%[^ ,:]+)", line):
            if m.group(2) in constants:
                bad.append(line.strip())
    for line in bad:
        print(f"A LAYOUT CHANGE OF A CONSTANT IS LEFT TO RUN: {line[:160]}")
    print(f"{len(constants)} constants, {len(bad)} layout changes of constants left")
    sys.exit(1 if bad else 0)


def compare(expected_dir, out):
    bad = 0
    for file in sorted(os.listdir(expected_dir)):
        want, got = np.load(f"{expected_dir}/{file}"), np.load(f"{out}/{file}")
        exact = want.dtype != np.float64  # the weights' own elements, moved or rounded
        # f32 sums round relative to their largest terms, hence the tolerance scaled by max |want|.
        ok = got.shape == want.shape and (
            np.array_equal(got, want) if exact else
            np.allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(want).max())))
        bad += not ok
        print(f"{'OK' if ok else 'MISMATCH'} {file[:-4]} {list(got.shape)}"
              f"{' exactly' if exact else ''}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(*args[:2], other_table=args[2:] == ["other-table"])
    elif command == "check-ir":
        check_ir(args[0])
    elif command == "compare":
        compare(f"{args[0]}/expected", args[1])
    else:
        sys.exit(f"unknown command {command}")
