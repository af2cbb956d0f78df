"""Test helper for tests/tools/smelt-import-external-data.test: an ONNX model whose tensors keep
their data in files beside it, as torch.onnx.export writes them, with fresh random weights; and
the same model broken in each way the importer must refuse.

    onnx_external_data.py write DIR [SEED]   DIR/model.onnx, DIR/weights.bin, DIR/bias.bin,
                                             DIR/x.npy, DIR/expected/y.npy (float64 NumPy)
    onnx_external_data.py bad KIND DIR       DIR/model.onnx with one external reference broken
                                             as KIND says (see BROKEN), data files beside it
"""
import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_constant_layouts import compare

IN, HIDDEN, OUT = 300, 256, 260  # w1 and w2 hold more than the 65,536 elements read as values
PAGE = 4096


def external(name, array, location, offset=None, length=None, checksum=None):
    """An initializer of `array`'s type and shape whose data is in `location`."""
    tensor = numpy_helper.from_array(np.zeros_like(array), name)
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in [("location", location), ("offset", offset), ("length", length),
                       ("checksum", checksum)]:
        if value is not None:
            tensor.external_data.add(key=key, value=str(value))
    return tensor


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((2, IN)).astype(np.float32),
        "w1": rng.standard_normal((IN, HIDDEN)).astype(np.float32) / 16,
        "b1": rng.standard_normal(HIDDEN).astype(np.float32),
        "w2": rng.standard_normal((HIDDEN, OUT)).astype(np.float32) / 16,
        "c": rng.standard_normal(OUT).astype(np.float32),
    }


def layout(a):
    """weights.bin: w1 at a page, w2 at an odd offset (not a multiple of 4: the importer copies
    it to align it), c after it; offsets and lengths of each."""
    w1_at = PAGE
    w2_at = w1_at + a["w1"].nbytes + 1
    c_at = w2_at + a["w2"].nbytes + 3
    blob = bytearray(c_at + a["c"].nbytes)
    for name, at in [("w1", w1_at), ("w2", w2_at), ("c", c_at)]:
        blob[at:at + a[name].nbytes] = a[name].tobytes()
    return bytes(blob), {"w1": w1_at, "w2": w2_at, "c": c_at}


def model(a, at, bias_sha1, broken=None):
    """y = relu(x @ w1 + b1) @ w2 + c; w1, w2 initializers in weights.bin, b1 the whole of
    bias.bin (no offset or length, its checksum stated), c a Constant node's external value.
    `broken` replaces w1's external_data fields."""
    w1 = dict(location="weights.bin", offset=at["w1"], length=a["w1"].nbytes)
    if broken:
        w1.update(broken)
    inits = [
        external("w1", a["w1"], **w1),
        external("w2", a["w2"], "weights.bin", at["w2"], a["w2"].nbytes),
        external("b1", a["b1"], "bias.bin", checksum=bias_sha1),
    ]
    c = external("c", a["c"], "weights.bin", at["c"], a["c"].nbytes)
    nodes = [
        helper.make_node("Constant", [], ["c"], value=c),
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "c"], ["y"]),
    ]
    info = helper.make_tensor_value_info
    return helper.make_graph(nodes, "external", [info("x", TensorProto.FLOAT, [2, IN])],
                             [info("y", TensorProto.FLOAT, [2, OUT])], inits)


def write_files(out, a):
    os.makedirs(out, exist_ok=True)
    blob, at = layout(a)
    with open(f"{out}/weights.bin", "wb") as f:
        f.write(blob)
    with open(f"{out}/bias.bin", "wb") as f:
        f.write(a["b1"].tobytes())
    return at, hashlib.sha1(a["b1"].tobytes()).hexdigest()


def write(out, seed=None):
    seed = int(seed) if seed else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    a = arrays(seed)
    at, sha1 = write_files(out, a)
    w = {k: v.astype(np.float64) for k, v in a.items()}
    y = np.maximum(w["x"] @ w["w1"] + w["b1"], 0) @ w["w2"] + w["c"]
    m = helper.make_model(model(a, at, sha1), opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{out}/model.onnx")
    onnx.checker.check_model(f"{out}/model.onnx")  # external files are found from its folder
    os.makedirs(f"{out}/expected", exist_ok=True)
    np.save(f"{out}/x.npy", a["x"])
    np.save(f"{out}/expected/y.npy", y)


# Each way an external reference can be wrong: w1's fields replaced (or a file changed).
BROKEN = {
    "absolute": {"location": "/etc/passwd"},
    "parent": {"location": "../weights.bin"},
    "symlink": {"location": "escape.bin"},   # a link to a file outside the model's folder
    "missing": {"location": "nothere.bin"},
    "folder": {"location": "sub"},
    "short": {"length": 10**9},
    "offset-past-end": {"offset": 10**9},
    "overlap": {},  # w1 ending where weights.bin does: over w2 and c
    "length": {"length": 4 * IN * HIDDEN - 4},
    "offset-text": {"offset": "12abc"},
    "no-location": {"location": None},
    "checksum": {"checksum": "0" * 40},
}


def bad(kind, out):
    a = arrays(7)
    at, sha1 = write_files(out, a)
    os.makedirs(f"{out}/sub", exist_ok=True)
    outside = os.path.join(os.path.dirname(os.path.abspath(out)), "outside.bin")
    with open(outside, "wb") as f:
        f.write(a["w1"].tobytes())
    if not os.path.lexists(f"{out}/escape.bin"):
        os.symlink(outside, f"{out}/escape.bin")
    broken = dict(BROKEN[kind])  # a None field is left out
    if kind == "overlap":
        broken["offset"] = at["c"] + a["c"].nbytes - a["w1"].nbytes
    graph = model(a, at, sha1, broken)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{out}/model.onnx")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(*args[:2])
    elif command == "bad":
        bad(*args)
    elif command == "compare":
        compare(f"{args[0]}/expected", args[1])
    else:
        sys.exit(f"unknown command {command}")
