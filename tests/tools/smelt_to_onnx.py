"""A small exporter for the lit round trip of a model trained by Smelt (issue 18): reads a
`smelt train` checkpoint (safetensors, by the format's specification) and writes its model as
ONNX with Python's onnx helper, as a PyTorch or Keras user's model arrives, so that `smelt
import` can read it back. Written from the model's definition in train/Trainer.cpp, not from
Smelt's IR, so the round trip checks the importer against an independent description.
  export CHECKPOINT MODEL.onnx WEIGHTS.safetensors   the model (weights as initializers named as
                                                    the checkpoint's parameters) and the
                                                    weights alone, for `smelt run --params`
  images N X.npy                                    the first N Fashion-MNIST test images,
                                                    [N, 784] float32 in [0, 1]
  check CHECKPOINT X.npy LOGITS.npy                 LOGITS against the model in float64 numpy
"""
import gzip
import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def read_checkpoint(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    meta = header.pop("__metadata__", {})
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        assert entry["dtype"] == "F32", name
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], np.float32).reshape(entry["shape"])
    params = {k: v for k, v in tensors.items() if not k.startswith("adam/")}
    return meta["model"], params


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def dense(nodes, x, name, relu):
    nodes.append(helper.make_node("MatMul", [x, f"{name}/kernel"], [f"{name}/mm"]))
    out = f"{name}/out" if relu else name
    nodes.append(helper.make_node("Add", [f"{name}/mm", f"{name}/bias"], [out]))
    if relu:
        nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"]))
        return f"{name}/relu"
    return out


def export(checkpoint, onnx_path, weights_path):
    model, params = read_checkpoint(checkpoint)
    nodes, inits = [], {}
    if model == "mlp":
        x = dense(nodes, "images", "dense1", True)
        x = dense(nodes, x, "dense2", True)
        dense(nodes, x, "logits", False)
        inits = dict(params)
    else:
        # ONNX convolutions are NCHW with [F, C, KH, KW] filters; Smelt's are NHWC with HWIO
        # filters, so the exported filters are transposed, and the features are brought back to
        # NHWC before the flatten that feeds the dense layer (Smelt flattens NHWC).
        shape = numpy_helper.from_array(np.array([-1, 1, 28, 28], np.int64), "image_shape")
        flat = numpy_helper.from_array(np.array([-1, 7 * 7 * 64], np.int64), "flat_shape")
        nodes.append(helper.make_node("Reshape", ["images", "image_shape"], ["x0"]))
        x = "x0"
        for conv in ("conv1", "conv2"):
            inits[f"{conv}/kernel"] = params[f"{conv}/kernel"].transpose(3, 2, 0, 1)
            inits[f"{conv}/bias"] = params[f"{conv}/bias"]
            nodes.append(helper.make_node("Conv", [x, f"{conv}/kernel", f"{conv}/bias"],
                                          [f"{conv}/out"], pads=[1, 1, 1, 1]))
            nodes.append(helper.make_node("Relu", [f"{conv}/out"], [f"{conv}/relu"]))
            nodes.append(helper.make_node("MaxPool", [f"{conv}/relu"], [f"{conv}/pool"],
                                          kernel_shape=[2, 2], strides=[2, 2]))
            x = f"{conv}/pool"
        nodes.append(helper.make_node("Transpose", [x], ["nhwc"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("Reshape", ["nhwc", "flat_shape"], ["flat"]))
        dense(nodes, "flat", "logits", False)
        inits["logits/kernel"] = params["logits/kernel"]
        inits["logits/bias"] = params["logits/bias"]
    initializers = [numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in inits.items()]
    if model == "cnn":
        initializers += [shape, flat]
    graph = helper.make_graph(
        nodes, f"smelt_{model}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="smelt_to_onnx.py")
    onnx.checker.check_model(proto)
    onnx.save(proto, onnx_path)
    write_safetensors(weights_path, inits)


def images(count, out):
    root = "/usr/share/datasets/fashion-mnist"
    with gzip.open(f"{root}/t10k-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:count]
    np.save(out, x.astype(np.float32) / 255.0)


def reference_logits(model, params, x):
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x = x.astype(np.float64)
    if model == "mlp":
        h = np.maximum(x @ p["dense1/kernel"] + p["dense1/bias"], 0)
        h = np.maximum(h @ p["dense2/kernel"] + p["dense2/bias"], 0)
        return h @ p["logits/kernel"] + p["logits/bias"]
    h = x.reshape(-1, 28, 28, 1)
    for conv in ("conv1", "conv2"):
        w = p[f"{conv}/kernel"]  # HWIO, 3x3, padding 1 ("same")
        padded = np.pad(h, ((0, 0), (1, 1), (1, 1), (0, 0)))
        out = np.zeros(h.shape[:3] + (w.shape[3],))
        for ky in range(3):
            for kx in range(3):
                out += padded[:, ky:ky + h.shape[1], kx:kx + h.shape[2], :] @ w[ky, kx]
        h = np.maximum(out + p[f"{conv}/bias"], 0)
        n, height, width, c = h.shape
        h = h.reshape(n, height // 2, 2, width // 2, 2, c).max(axis=(2, 4))
    return h.reshape(h.shape[0], -1) @ p["logits/kernel"] + p["logits/bias"]


def check(checkpoint, x_path, logits_path):
    model, params = read_checkpoint(checkpoint)
    want = reference_logits(model, params, np.load(x_path))
    got = np.load(logits_path).astype(np.float64)
    assert got.shape == want.shape, f"logits {got.shape}, expected {want.shape}"
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    agree = np.mean(got.argmax(1) == want.argmax(1))
    print(f"{model}: relative error {error:.2e}, argmax agrees on {agree:.4f} of {len(got)}")
    if not error < 1e-5 or agree < 0.999:
        sys.exit(f"{model}: the imported model does not match (relative error {error:.2e})")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "export":
        export(*args)
    elif command == "images":
        images(int(args[0]), args[1])
    elif command == "check":
        check(*args)
    else:
        sys.exit(f"unknown command {command}")
