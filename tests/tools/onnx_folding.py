"""Test helper for tests/tools/smelt-import-folding.test: one ONNX model whose outputs are values
the importer computes at import time (constant folding of shape arithmetic) from fresh random
known inputs, one output per folding path, each with the answer NumPy gives following the ONNX
spec; and TorchScript's pads pattern (Concat -> Reshape -> backwards Slice -> Transpose ->
Reshape -> Pad) applied to a run-time input.

    onnx_folding.py write DIR        DIR/model.onnx, DIR/x.npy, DIR/expected/<output>.npy
    onnx_folding.py compare DIR OUT  each OUT/<output>.npy against DIR/expected, exactly
    onnx_folding.py ort DIR          ONNX Runtime's outputs against DIR/expected (when installed)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_tool import save_case

INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
TENSOR_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
                np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
                np.dtype(bool): TensorProto.BOOL}


def onnx_slice(data, starts, ends, axes, steps):
    """ONNX Slice as its spec words it: negative starts and ends count from the end, then are
    clamped to [0, dim] stepping forwards, to [0, dim-1] (start) and [-1, dim-1] (end) stepping
    backwards."""
    for s, e, a, step in zip(starts, ends, axes, steps):
        dim = data.shape[a]
        s, e = s + dim if s < 0 else s, e + dim if e < 0 else e
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        data = np.take(data, list(range(s, e, step)), axis=a)
    return data


class Model:
    """Nodes over known values (Constant nodes), each case's output and its expected value."""

    def __init__(self, rng):
        self.rng, self.nodes, self.outputs, self.expected, self.count = rng, [], [], {}, 0

    def known(self, value):
        self.count += 1
        name = f"k{self.count}"
        self.nodes.append(helper.make_node("Constant", [], [name],
                                           value=numpy_helper.from_array(np.asarray(value))))
        return name

    def node(self, op, inputs, **attrs):
        self.count += 1
        name = f"v{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [name], **attrs))
        return name

    def output(self, name, value, expected):
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        self.outputs.append(helper.make_tensor_value_info(
            name, TENSOR_TYPES[expected.dtype], expected.shape))
        self.expected[name] = expected


def add_cases(m):
    rng = m.rng
    ints = lambda shape: rng.integers(-50, 50, shape).astype(np.int64)
    floats = lambda shape: rng.uniform(-10, 10, shape).astype(np.float32)
    a, b = ints((2, 3)), ints((3,))
    b[b == 0] = 7
    for op, f in [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                  ("Equal", np.equal), ("Less", np.less), ("Greater", np.greater)]:
        m.output(f"{op.lower()}_i64", m.node(op, [m.known(a), m.known(b)]), f(a, b))
    # Integer Div truncates towards zero (C's division), unlike NumPy's floor division.
    m.output("div_i64", m.node("Div", [m.known(a), m.known(b)]),
             (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(np.int64))
    fa, fb = floats((2, 3)), floats((2, 1))
    for op, f in [("Add", np.add), ("Mul", np.multiply), ("Div", np.divide)]:
        m.output(f"{op.lower()}_f32", m.node(op, [m.known(fa), m.known(fb)]), f(fa, fb))
    big = rng.integers(2**20, 2**30, (4,)).astype(np.int32)
    m.output("mul_i32_wraps", m.node("Mul", [m.known(big), m.known(big)]), big * big)
    m.output("neg_f32", m.node("Neg", [m.known(fa)]), -fa)
    m.output("abs_i64", m.node("Abs", [m.known(a)]), np.abs(a))
    # Mod: fmod=0 takes the divisor's sign (NumPy's mod), fmod=1 the dividend's (C's fmod), as
    # TorchScript's window shifts compute (Swin: (-shift) % window).
    m.output("mod_i64", m.node("Mod", [m.known(a), m.known(b)]), np.mod(a, b))
    m.output("fmod_i64", m.node("Mod", [m.known(a), m.known(b)], fmod=1), np.fmod(a, b))
    m.output("fmod_f32", m.node("Mod", [m.known(fa), m.known(fb)], fmod=1), np.fmod(fa, fb))
    m.output("min3_i64", m.node("Min", [m.known(a), m.known(b), m.known(c0 := ints((1, 3)))]),
             np.minimum(np.minimum(a, b), c0))
    m.output("max_i64", m.node("Max", [m.known(a), m.known(b)]), np.maximum(a, b))
    m.output("cast_f32_i64", m.node("Cast", [m.known(fa)], to=TensorProto.INT64),
             fa.astype(np.int64))
    m.output("cast_f32_f16", m.node("Cast", [m.known(fa)], to=TensorProto.FLOAT16),
             fa.astype(np.float16))
    m.output("cast_i64_bool", m.node("Cast", [m.known(a)], to=TensorProto.BOOL), a != 0)
    c = ints((2, 2))
    m.output("concat_axis1", m.node("Concat", [m.known(a), m.known(c)], axis=1),
             np.concatenate([a, c], axis=1))
    table, picks = ints((7,)), rng.integers(-7, 7, (2, 3)).astype(np.int64)
    m.output("gather_negative", m.node("Gather", [m.known(table), m.known(picks)]),
             np.take(table, picks))
    data = ints((4, 5, 3))
    slices = {  # starts, ends, axes, steps
        "reverse_all": ([-1], [INT64_MIN], [0], [-1]),
        "reverse_by_2": ([INT64_MAX], [INT64_MIN], [1], [-2]),
        "reverse_clamped_start": ([-100], [INT64_MIN], [1], [-1]),  # start clamps to 0
        "reverse_inner": ([3, 2], [0, -6], [-2, 0], [-1, -1]),
        "forward_step_2": ([1, -2], [100, 3], [1, 2], [2, 1]),
        "mixed_directions": ([0, 4], [4, 1], [0, 1], [3, -2]),
        "empty_forward": ([3], [1], [1], [1]),
    }
    for name, (starts, ends, axes, steps) in slices.items():
        value = m.node("Slice", [m.known(data)] + [m.known(np.array(v, np.int64))
                                                   for v in (starts, ends, axes, steps)])
        m.output(f"slice_{name}", value, onnx_slice(data, starts, ends, axes, steps))
    m.output("transpose_201", m.node("Transpose", [m.known(data)], perm=[2, 0, 1]),
             data.transpose(2, 0, 1))
    m.output("transpose_default", m.node("Transpose", [m.known(data)]), data.transpose())
    cond = rng.integers(0, 2, (2, 1)).astype(bool)
    m.output("where", m.node("Where", [m.known(cond), m.known(a), m.known(b)]), np.where(cond, a, b))
    m.output("expand", m.node("Expand", [m.known(b), m.known(np.array([2, 1, 3], np.int64))]),
             np.broadcast_to(b, (2, 1, 3)).copy())
    reshaped = m.node("Reshape", [m.known(data), m.known(np.array([3, -1], np.int64))])
    unsqueezed = m.node("Unsqueeze", [reshaped, m.known(np.array([0], np.int64))])
    m.output("reshape_unsqueeze_flatten", m.node("Flatten", [unsqueezed], axis=2),
             data.reshape(1, 3, 20).reshape(3, 20))
    m.output("shape_size", m.node("Concat", [m.node("Shape", [m.known(data)]),
                                             m.node("Reshape", [m.node("Size", [m.known(data)]),
                                                                m.known(np.array([1], np.int64))])],
                                  axis=0), np.array([4, 5, 3, 60], np.int64))


def add_pads_pattern(m, x):
    """TorchScript's F.pad(x, (left, right)): pads in PyTorch's order (last dimension first),
    reordered for ONNX's Pad in the graph."""
    left = int(m.rng.integers(1, 4))
    right = left + int(m.rng.integers(1, 3))  # unequal, so a swap of the two shows
    pads = m.known(np.array([left, right], np.int64))
    full = m.node("Concat", [pads, m.known(np.zeros(2, np.int64))], axis=0)
    pairs = m.node("Reshape", [full, m.known(np.array([-1, 2], np.int64))])
    flipped = m.node("Slice", [m.known(np.array(v, np.int64)) if i else pairs
                               for i, v in enumerate([None, [-1], [INT64_MIN], [0], [-1]])])
    onnx_pads = m.node("Reshape", [m.node("Transpose", [flipped], perm=[1, 0]),
                                   m.known(np.array([-1], np.int64))])
    m.output("padded", m.node("Pad", ["x", onnx_pads]), np.pad(x, [(0, 0), (left, right)]))
    # A backwards Slice read at import time, with no op after it to hide a missing reversal.
    reversed_pads = m.node("Slice", [m.known(np.array([right, 0, left, 0], np.int64))] +
                           [m.known(np.array(v, np.int64)) for v in ([-1], [INT64_MIN], [0], [-1])])
    m.output("padded_reversed", m.node("Pad", ["x", reversed_pads]),
             np.pad(x, [(0, 0), (left, right)]))


def write(out):
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    m = Model(np.random.default_rng(seed))
    x = m.rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    add_cases(m)
    add_pads_pattern(m, x)
    graph = helper.make_graph(m.nodes, "folding",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              m.outputs)
    save_case(out, graph, {"x": x}, m.expected)


def check(results, out):
    """Each result against its expected value: same dtype, shape and elements."""
    bad = 0
    for name in sorted(os.listdir(f"{out}/expected")):
        name = name[:-len(".npy")]
        want, got = np.load(f"{out}/expected/{name}.npy"), results(name)
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            bad += 1
            print(f"MISMATCH {name}: got {got.dtype} {got.shape} {got.ravel()[:12]}, "
                  f"expected {want.dtype} {want.shape} {want.ravel()[:12]}")
    print(f"{len(os.listdir(f'{out}/expected')) - bad} outputs match, {bad} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(args[0])
    elif command == "compare":
        check(lambda name: np.load(f"{args[1]}/{name}.npy"), args[0])
    elif command == "ort":
        import onnxruntime
        session = onnxruntime.InferenceSession(f"{args[0]}/model.onnx")
        names = [o.name for o in session.get_outputs()]
        values = dict(zip(names, session.run(None, {"x": np.load(f"{args[0]}/x.npy")})))
        check(lambda name: values[name], args[0])
    else:
        sys.exit(f"unknown command {command}")
