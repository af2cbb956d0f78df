"""Test helper for tests/tools/smelt-import-opset-ops.test: one small model per op and variant
that opsets 18-28 added or changed (Gelu, Mish, Swish, SwiGLU, GroupNormalization-18 and -21,
RMSNormalization, RotaryEmbedding, Attention-23/24/25, Split's num_outputs, Pad's axes, wrap
and negative pads, Reduce* axes as an input, ReduceMax of bool, Resize's axes,
keep_aspect_ratio_policy, antialias and half_pixel_symmetric, float Mod with fmod=0,
SpaceToDepth's CRD), each on fresh random inputs (never zeros) with its float64 NumPy
reference (onnx_opset_reference.py). Models are built with onnx.helper at the case's opset
(Debian's onnx 1.12 knows none of these opsets, so nothing is checked); the cases of one opset
share a model, their inputs and outputs prefixed by the case's name.

    onnx_opset_ops.py write DIR        DIR/opset<N>.onnx, DIR/opset<N>.flags (smelt run's
                                       --input flags), DIR/in/*.npy, DIR/expected/*.npy,
                                       DIR/cases/<case>.onnx (one model a case), DIR/refused/*.onnx
    onnx_opset_ops.py compare DIR OUT  each OUT/<output>.npy against DIR/expected
    onnx_opset_ops.py ort DIR          ONNX Runtime on each DIR/cases model against the same
"""
import os
import sys
from collections import defaultdict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnx_opset_reference as ref

TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
         np.dtype(np.int64): TensorProto.INT64, np.dtype(bool): TensorProto.BOOL}


class Cases:
    """The cases: each a node (or a few) over its own inputs, at its opset, with expected outputs."""

    def __init__(self, rng):
        self.rng, self.cases = rng, []

    def floats(self, *shape, dtype=np.float32):
        """Uniform in +-[0.1, 2): random signs, never zero."""
        magnitude = self.rng.uniform(0.1, 2.0, shape)
        return (magnitude * self.rng.choice([-1.0, 1.0], shape)).astype(dtype)

    def add(self, name, opset, op, inputs, outputs, known=(), **attrs):
        """`inputs`: (name, value) pairs, graph inputs unless named in `known` (then Constant
        nodes: values the importer needs); None skips an optional input. `outputs`: (name,
        expected) pairs, the expected value in float64 or the output's exact type."""
        nodes, graph_inputs, arrays, names = [], [], {}, []
        for input_name, value in inputs:
            if value is None:
                names.append("")
                continue
            full = f"{name}_{input_name}"
            names.append(full)
            if input_name in known:
                nodes.append(helper.make_node("Constant", [], [full],
                                              value=numpy_helper.from_array(np.asarray(value))))
            else:
                graph_inputs.append(helper.make_tensor_value_info(full, TYPES[value.dtype], value.shape))
                arrays[full] = value
        dtype = next(iter(arrays.values())).dtype
        expected, output_names = {}, []
        for output_name, value in outputs:  # a None value: an output left out ("")
            output_names.append(f"{name}_{output_name}" if value is not None else "")
            if value is not None:
                value = np.asarray(value)
                expected[output_names[-1]] = (value if value.dtype in (bool, np.int64)
                                              else value.astype(dtype))
        nodes.append(helper.make_node(op, names, output_names, name=name, **attrs))
        self.cases.append(dict(name=name, opset=opset, nodes=nodes, inputs=graph_inputs,
                               arrays=arrays, expected=expected))


def add_activations(c):
    x = c.floats(4, 7)
    wide = x.astype(np.float64)
    c.add("gelu", 20, "Gelu", [("x", x)], [("y", ref.gelu(wide, "none"))])
    c.add("gelu_tanh", 20, "Gelu", [("x", x)], [("y", ref.gelu(wide, "tanh"))], approximate="tanh")
    c.add("mish", 18, "Mish", [("x", x)], [("y", wide * np.tanh(np.log1p(np.exp(wide))))])
    c.add("swish", 24, "Swish", [("x", x)], [("y", wide * ref.sigmoid(0.7 * wide))], alpha=0.7)
    a, b = c.floats(3, 8), c.floats(3, 8)
    c.add("swiglu", 28, "SwiGLU", [("a", a), ("b", b)],
          [("y", a * ref.sigmoid(1.3 * a.astype(np.float64)) * b)], alpha=1.3)
    p, q = c.floats(5, 6), c.floats(5, 6)
    c.add("mod_floor", 28, "Mod", [("a", p), ("b", q)],
          [("y", p - np.floor(p.astype(np.float64) / q) * q)])


def add_normalizations(c):
    x = c.floats(2, 6, 3, 4)
    scale, bias = c.floats(3), c.floats(3)
    c.add("groupnorm18", 18, "GroupNormalization", [("x", x), ("scale", scale), ("bias", bias)],
          [("y", ref.group_norm(x.astype(np.float64), scale, bias, 3, 1e-5, False))], num_groups=3)
    x, scale, bias = c.floats(2, 6, 5), c.floats(6), c.floats(6)
    c.add("groupnorm21", 21, "GroupNormalization", [("x", x), ("scale", scale), ("bias", bias)],
          [("y", ref.group_norm(x.astype(np.float64), scale, bias, 2, 1e-3, True))],
          num_groups=2, epsilon=1e-3, stash_type=1)
    x, scale = c.floats(2, 3, 8), c.floats(8)
    c.add("rmsnorm", 23, "RMSNormalization", [("x", x), ("scale", scale)],
          [("y", ref.rms_norm(x.astype(np.float64), scale, -1, 1e-6))], epsilon=1e-6)
    scale = c.floats(3, 8)
    c.add("rmsnorm_axis1", 23, "RMSNormalization", [("x", x), ("scale", scale)],
          [("y", ref.rms_norm(x.astype(np.float64), scale, 1, 1e-5))], axis=1)
    half, half_scale = x.astype(np.float16), c.floats(8, dtype=np.float16)
    c.add("rmsnorm_f16", 23, "RMSNormalization", [("x", half), ("scale", half_scale)],
          [("y", ref.rms_norm(half.astype(np.float64), half_scale, -1, 1e-5))])
    scale, bias = c.floats(3, 8), c.floats(8)
    c.add("layernorm_stash", 23, "LayerNormalization", [("x", x), ("scale", scale), ("b", bias)],
          [("y", ref.layer_norm(x.astype(np.float64), scale, bias, 1, 1e-5))], axis=1, stash_type=1)


def add_rotary(c):
    b, h, s, d, positions = 2, 3, 5, 8, 11
    x = c.floats(b, h, s, d)
    angles = c.rng.uniform(0, 6.3, (positions, d // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    ids = c.rng.integers(0, positions, (b, s)).astype(np.int64)
    c.add("rotary_4d", 23, "RotaryEmbedding",
          [("x", x), ("cos", cos), ("sin", sin), ("ids", ids)],
          [("y", ref.rotary(x.astype(np.float64), cos, sin, ids))])
    x = c.floats(b, s, h * d)
    angles = c.rng.uniform(0, 6.3, (b, s, 3))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    c.add("rotary_3d_interleaved_partial", 23, "RotaryEmbedding",
          [("x", x), ("cos", cos), ("sin", sin)],
          [("y", ref.rotary(x.astype(np.float64), cos, sin, None, True, 6, h))],
          interleaved=1, rotary_embedding_dim=6, num_heads=h)


def add_attention(c):
    f64 = lambda *arrays: [a.astype(np.float64) for a in arrays]
    q, k, v = c.floats(2, 4, 5, 8), c.floats(2, 4, 6, 8), c.floats(2, 4, 6, 7)
    mask = c.rng.integers(0, 2, (5, 6)).astype(bool)
    mask[:, 0] = True
    y, _, _, modes = ref.attention(*f64(q, k, v), mask=mask)
    c.add("attention_bool_mask", 23, "Attention",
          [("q", q), ("k", k), ("v", v), ("mask", mask)],
          [("y", y), ("present_k", None), ("present_v", None), ("probs", modes[3])],
          qk_matmul_output_mode=3)
    # 3-D inputs, grouped-query heads (4 query heads on 2 key/value heads), causal, scale.
    q, k, v = c.floats(2, 5, 32), c.floats(2, 6, 16), c.floats(2, 6, 12)
    y, _, _, _ = ref.attention(*f64(q, k, v), causal=True, scale=0.3, q_heads=4, kv_heads=2)
    c.add("attention_gqa_causal", 23, "Attention", [("q", q), ("k", k), ("v", v)], [("y", y)],
          is_causal=1, scale=0.3, q_num_heads=4, kv_num_heads=2)
    q, k, v = c.floats(2, 2, 5, 8), c.floats(2, 2, 6, 8), c.floats(2, 2, 6, 8)
    mask = c.floats(2, 1, 5, 6)
    y, _, _, modes = ref.attention(*f64(q, k, v), mask=mask.astype(np.float64), softcap=2.0)
    c.add("attention_softcap", 23, "Attention", [("q", q), ("k", k), ("v", v), ("mask", mask)],
          [("y", y), ("present_k", k), ("present_v", v), ("qk", modes[1])],
          softcap=2.0, qk_matmul_output_mode=1)
    # The cache: past keys and values before the new ones, the causal frontier shifted by them.
    q, k, v = c.floats(1, 2, 2, 4), c.floats(1, 2, 2, 4), c.floats(1, 2, 2, 4)
    pk, pv = c.floats(1, 2, 3, 4), c.floats(1, 2, 3, 4)
    y, present_k, present_v, _ = ref.attention(*f64(q, k, v), past=f64(pk, pv), causal=True)
    c.add("attention_past", 23, "Attention",
          [("q", q), ("k", k), ("v", v), ("mask", None), ("pk", pk), ("pv", pv)],
          [("y", y), ("present_k", present_k), ("present_v", present_v)], is_causal=1)
    # A mask shorter than the keys (the rest masked), one query row with no key left: zeros.
    q, k, v = c.floats(1, 1, 3, 4), c.floats(1, 1, 5, 4), c.floats(1, 1, 5, 4)
    mask = np.array([[True, False, True], [False, False, False], [False, True, True]])
    y, _, _, _ = ref.attention(*f64(q, k, v), mask=mask)
    c.add("attention_short_mask", 23, "Attention",
          [("q", q), ("k", k), ("v", v), ("mask", mask)], [("y", y)])
    q, k, v = c.floats(2, 2, 3, 4), c.floats(2, 2, 6, 4), c.floats(2, 2, 6, 4)
    lengths = np.array([4, 6], np.int64)
    y, _, _, _ = ref.attention(*f64(q, k, v), nonpad=lengths, causal=True)
    c.add("attention_nonpad", 24, "Attention",
          [("q", q), ("k", k), ("v", v)] + [(n, None) for n in ("mask", "pk", "pv")] +
          [("lengths", lengths)], [("y", y)], is_causal=1)
    q, k, v = c.floats(1, 2, 4, 4), c.floats(1, 2, 6, 4), c.floats(1, 2, 6, 4)
    y, _, _, _ = ref.attention(*f64(q, k, v), window=(2, 1))
    c.add("attention_window", 25, "Attention", [("q", q), ("k", k), ("v", v)], [("y", y)],
          left_window_size=2, right_window_size=1)


def add_shapes(c):
    x = c.floats(2, 7)
    c.add("split_num_outputs", 18, "Split", [("x", x)],
          [("a", x[:, :3]), ("b", x[:, 3:6]), ("c", x[:, 6:])], axis=1, num_outputs=3)
    x = c.floats(2, 3, 4)
    pads, axes = np.array([1, 2, 0, 3], np.int64), np.array([2, 0], np.int64)
    c.add("pad_axes", 18, "Pad", [("x", x), ("pads", pads), ("value", np.array(1.5, np.float32)),
                                  ("axes", axes)],
          [("y", np.pad(x, [(2, 3), (0, 0), (1, 0)], constant_values=1.5))],
          known=("pads", "value", "axes"))
    x = c.floats(3, 4)
    c.add("pad_wrap", 19, "Pad", [("x", x), ("pads", np.array([2, 1, 1, 3], np.int64))],
          [("y", np.pad(x, [(2, 1), (1, 3)], mode="wrap"))], known=("pads",), mode="wrap")
    c.add("pad_negative", 18, "Pad", [("x", x), ("pads", np.array([-1, 2, 1, -2], np.int64))],
          [("y", np.pad(x[1:, :2], [(0, 1), (2, 0)]))], known=("pads",))
    x = c.floats(2, 6, 2, 4)
    blocks = x.reshape(2, 6, 1, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(2, 24, 1, 2)
    c.add("spacetodepth_crd", 28, "SpaceToDepth", [("x", x)], [("y", blocks)], blocksize=2,
          mode="CRD")


def add_reductions(c):
    x = c.floats(3, 4, 5)
    axes = np.array([0, -1], np.int64)
    wide = x.astype(np.float64)
    for op, f in [("ReduceMean", lambda t, a, k: t.mean(a, keepdims=k)),
                  ("ReduceMax", lambda t, a, k: t.max(a, keepdims=k)),
                  ("ReduceL2", lambda t, a, k: np.sqrt((t * t).sum(a, keepdims=k))),
                  ("ReduceLogSumExp", lambda t, a, k: np.log(np.exp(t).sum(a, keepdims=k)))]:
        c.add(f"{op.lower()}_axes", 18, op, [("x", x), ("axes", axes)],
              [("y", f(wide, (0, 2), False))], known=("axes",), keepdims=0)
    # No axes with noop_with_empty_axes: no reduction, but the square stays.
    c.add("reducesumsquare_noop", 18, "ReduceSumSquare", [("x", x)], [("y", wide * wide)],
          noop_with_empty_axes=1)
    flags = c.rng.integers(0, 2, (3, 4)).astype(bool)
    for op, f in [("ReduceMax", np.any), ("ReduceMin", np.all)]:
        c.add(f"{op.lower()}_bool", 20, op, [("x", flags), ("axes", np.array([1], np.int64))],
              [("y", f(flags, axis=1))], known=("axes",), keepdims=0)


def add_resizes(c):
    x = c.floats(1, 2, 4, 6)
    wide = x.astype(np.float64)
    empty = np.array([], np.float32)
    # sizes [5, 9] on H, W: not_larger keeps the smaller scale, 1.25, for both: 5 x 8.
    y = ref.resize_axis(ref.resize_axis(wide, 2, 5, 1.25, "linear"), 3, 8, 1.25, "linear")
    c.add("resize_not_larger", 18, "Resize",
          [("x", x), ("roi", empty), ("scales", empty), ("sizes", np.array([5, 9], np.int64))],
          [("y", y)], known=("roi", "scales", "sizes"), mode="linear", axes=[2, 3],
          keep_aspect_ratio_policy="not_larger")
    x = c.floats(1, 1, 8, 9)
    wide = x.astype(np.float64)
    for mode in ["linear", "cubic"]:
        y = ref.resize_axis(ref.resize_axis(wide, 2, 4, 0.5, mode, antialias=True), 3, 3, 0.4,
                            mode, antialias=True)
        c.add(f"resize_antialias_{mode}", 18, "Resize",
              [("x", x), ("roi", empty), ("scales", np.array([1, 1, 0.5, 0.4], np.float32))],
              [("y", y)], known=("roi", "scales"), mode=mode, antialias=1)
    x = c.floats(1, 1, 4, 5)
    wide = x.astype(np.float64)
    y = ref.resize_axis(ref.resize_axis(wide, 2, 6, 1.7, "linear", "half_pixel_symmetric"), 3, 3,
                        0.6, "linear", "half_pixel_symmetric")
    c.add("resize_half_pixel_symmetric", 19, "Resize",
          [("x", x), ("roi", empty), ("scales", np.array([1.7, 0.6], np.float32))],
          [("y", y)], known=("roi", "scales"), mode="linear", axes=[-2, -1],
          coordinate_transformation_mode="half_pixel_symmetric")


def add_refused(c):
    """Models the importer must refuse with an error naming the node and the reason."""
    x = c.floats(4, 3)
    c.add("scatter_max", 18, "ScatterElements",
          [("x", x), ("i", np.array([[1, 0, 2]], np.int64)), ("u", c.floats(1, 3))], [("y", x)],
          reduction="max")
    c.add("gelu_bogus", 20, "Gelu", [("x", x)], [("y", x)], approximate="erf")
    c.add("layernorm_int_stash", 23, "LayerNormalization", [("x", x), ("s", c.floats(3))],
          [("y", x)], stash_type=7)


def model(cases, opset):
    graph = helper.make_graph(
        [n for case in cases for n in case["nodes"]], f"opset{opset}",
        [i for case in cases for i in case["inputs"]],
        [helper.make_tensor_value_info(name, TYPES[value.dtype], value.shape)
         for case in cases for name, value in case["expected"].items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def write(out):
    seed = int(os.environ.get("SMELT_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"seed {seed} (SMELT_TEST_SEED replays it)")
    c = Cases(np.random.default_rng(seed))
    for add in (add_activations, add_normalizations, add_rotary, add_attention, add_shapes,
                add_reductions, add_resizes):
        add(c)
    for folder in ("in", "expected", "cases", "refused"):
        os.makedirs(f"{out}/{folder}", exist_ok=True)
    by_opset = defaultdict(list)
    for case in c.cases:
        by_opset[case["opset"]].append(case)
        onnx.save(model([case], case["opset"]), f"{out}/cases/{case['name']}.onnx")
        for name, value in case["arrays"].items():
            np.save(f"{out}/in/{name}.npy", value)
        for name, value in case["expected"].items():
            np.save(f"{out}/expected/{name}.npy", value)
    for opset, cases in sorted(by_opset.items()):
        onnx.save(model(cases, opset), f"{out}/opset{opset}.onnx")
        with open(f"{out}/opset{opset}.flags", "w") as f:
            f.write(" ".join(f"--input {name}={out}/in/{name}.npy"
                             for case in cases for name in case["arrays"]))
    refused = Cases(c.rng)
    add_refused(refused)
    for case in refused.cases:
        onnx.save(model([case], case["opset"]), f"{out}/refused/{case['name']}.onnx")
    print(f"{len(c.cases)} cases in {len(by_opset)} models (opsets {sorted(by_opset)})")


def agrees(got, want):
    """Exact for bool and integers; else within rtol 1e-5 (f32) or 2e-3 (f16) of the float64
    reference, with an absolute floor of that times the output's largest magnitude."""
    if want.dtype in (bool, np.int64):
        return got.dtype == want.dtype and np.array_equal(got, want), 0.0
    tolerance = 2e-3 if want.dtype == np.float16 else 1e-5
    error = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0)
    scale = np.max(np.abs(want.astype(np.float64)), initial=1.0)
    ok = got.shape == want.shape and np.allclose(got.astype(np.float64), want.astype(np.float64),
                                                 rtol=tolerance, atol=tolerance * scale)
    return ok, error / scale


def check(results, out):
    names = sorted(f[:-len(".npy")] for f in os.listdir(f"{out}/expected"))
    bad, largest = 0, {}
    for name in names:
        want, got = np.load(f"{out}/expected/{name}.npy"), results(name)
        ok, error = agrees(got, want) if got is not None else (False, float("nan"))
        if not ok:
            bad += 1
            print(f"MISMATCH {name}: relative error {error:.2e}")
        elif want.dtype not in (bool, np.int64):
            largest[want.dtype.name] = max(largest.get(want.dtype.name, 0.0), error)
    errors = ", ".join(f"{t} {e:.1e}" for t, e in sorted(largest.items()))
    print(f"{len(names) - bad} outputs match, {bad} differ (largest relative error: {errors})")
    return bad


def ort(out):
    """Each case's model through ONNX Runtime, against the same float64 references."""
    import onnxruntime
    values, refused = {}, []
    for file in sorted(os.listdir(f"{out}/cases")):
        path = f"{out}/cases/{file}"
        try:
            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            feeds = {i.name: np.load(f"{out}/in/{i.name}.npy") for i in session.get_inputs()}
            names = [o.name for o in session.get_outputs()]
            values.update(zip(names, session.run(None, feeds)))
        except Exception as e:
            refused.append(file[:-len(".onnx")])
            print(f"ORT cannot run {file}: {str(e).splitlines()[0][:160]}")
    print(f"onnxruntime {onnxruntime.__version__}: ran {len(os.listdir(f'{out}/cases')) - len(refused)} "
          f"of {len(os.listdir(f'{out}/cases'))} cases")
    return check(lambda name: values.get(name), out)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(args[0])
    elif command == "compare":
        sys.exit(1 if check(lambda name: np.load(f"{args[1]}/{name}.npy"), args[0]) else 0)
    elif command == "ort":
        sys.exit(1 if ort(args[0]) else 0)
    else:
        sys.exit(f"unknown command {command}")
