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
  validation TUNED EXPORTED BEGIN END LOG           the validation loss in LOG of the ResNet
                                                    fine-tuned from the export (TUNED, its
                                                    checkpoint) on training images [BEGIN, END)
                                                    against float64 numpy, with its statistics
"""
import gzip
import json
import re
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
    return meta.get("model"), params


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


# The built-in ResNet (frontend/Models.cpp, resnetClassifier with ResnetConfig's defaults):
# a 3x3 stem, then 3 stages of 2 residual blocks of widths 16, 32, 64, the first block of each
# later stage striding by 2 with a 1x1 projection shortcut; each convolution without a bias and
# followed by batch norm (epsilon 1e-5); global average pooling; a dense layer to 10 logits.
RESNET_STAGES, RESNET_BLOCKS, RESNET_WIDTH = 3, 2, 16


def resnet_convolutions():
    """(name, stride, kernel) of each convolution in order, and the residual structure."""
    blocks = []
    channels = RESNET_WIDTH
    for s in range(RESNET_STAGES):
        filters = RESNET_WIDTH << s
        for b in range(RESNET_BLOCKS):
            name = f"stage{s}/block{b}"
            stride = 2 if s > 0 and b == 0 else 1
            projection = channels != filters or stride != 1
            blocks.append((name, stride, projection))
            channels = filters
    return blocks


def same_pads(size, kernel, stride):
    """TensorFlow's "same" padding of one spatial axis: (before, after), the extra after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def export_resnet(params, nodes, inits):
    shape = numpy_helper.from_array(np.array([-1, 1, 28, 28], np.int64), "image_shape")
    nodes.append(helper.make_node("Reshape", ["images", "image_shape"], ["x0"]))
    size = [28]

    def conv_bn(x, name, stride, relu):
        kernel = params[f"{name}/kernel"]  # HWIO
        inits[f"{name}/kernel"] = kernel.transpose(3, 2, 0, 1)
        k = kernel.shape[0]
        before, after = same_pads(size[0], k, stride)
        nodes.append(helper.make_node("Conv", [x, f"{name}/kernel"], [f"{name}/conv"],
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[before, before, after, after]))
        bn = [f"{name}/bn/{p}" for p in ("gamma", "beta", "moving_mean", "moving_variance")]
        for p in bn:
            inits[p] = params[p]
        out = f"{name}/bn"
        nodes.append(helper.make_node("BatchNormalization", [f"{name}/conv"] + bn, [out],
                                      epsilon=1e-5, momentum=0.9))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"]))
            out = f"{name}/relu"
        return out

    x = conv_bn("x0", "stem", 1, True)
    for name, stride, projection in resnet_convolutions():
        h = conv_bn(x, f"{name}/conv1", stride, True)
        shortcut = conv_bn(x, f"{name}/shortcut", stride, False) if projection else x
        size[0] = -(-size[0] // stride)
        h = conv_bn(h, f"{name}/conv2", 1, False)
        nodes.append(helper.make_node("Add", [h, shortcut], [f"{name}/sum"]))
        nodes.append(helper.make_node("Relu", [f"{name}/sum"], [f"{name}/out"]))
        x = f"{name}/out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", [("pooled")], ["flat"]))
    dense(nodes, "flat", "logits", False)
    inits["logits/kernel"] = params["logits/kernel"]
    inits["logits/bias"] = params["logits/bias"]
    return [shape]


def export(checkpoint, onnx_path, weights_path):
    model, params = read_checkpoint(checkpoint)
    nodes, inits, constants = [], {}, []
    if model == "resnet":
        constants = export_resnet(params, nodes, inits)
    elif model == "mlp":
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
    initializers += constants
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


def conv2d(h, w, stride):
    """NHWC `h` convolved with HWIO `w`, "same" padding, in float64."""
    k = w.shape[0]
    n, height, width, _ = h.shape
    (top, bottom), (left, right) = same_pads(height, k, stride), same_pads(width, k, stride)
    padded = np.pad(h, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h, out_w = -(-height // stride), -(-width // stride)
    out = np.zeros((n, out_h, out_w, w.shape[3]))
    for ky in range(k):
        for kx in range(k):
            window = padded[:, ky:ky + stride * out_h:stride, kx:kx + stride * out_w:stride, :]
            out += window @ w[ky, kx]
    return out


def resnet_logits(p, x):
    def conv_bn(h, name, stride):
        y = conv2d(h, p[f"{name}/kernel"], stride)
        bn = f"{name}/bn"
        scale = p[f"{bn}/gamma"] / np.sqrt(p[f"{bn}/moving_variance"] + 1e-5)
        return (y - p[f"{bn}/moving_mean"]) * scale + p[f"{bn}/beta"]

    h = np.maximum(conv_bn(x.reshape(-1, 28, 28, 1), "stem", 1), 0)
    for name, stride, projection in resnet_convolutions():
        out = np.maximum(conv_bn(h, f"{name}/conv1", stride), 0)
        out = conv_bn(out, f"{name}/conv2", 1)
        shortcut = conv_bn(h, f"{name}/shortcut", stride) if projection else h
        h = np.maximum(out + shortcut, 0)
    return h.mean(axis=(1, 2)) @ p["logits/kernel"] + p["logits/bias"]


def reference_logits(model, params, x):
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x = x.astype(np.float64)
    if model == "resnet":
        return resnet_logits(p, x)
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


def train_images(begin, end):
    root = "/usr/share/datasets/fashion-mnist"
    with gzip.open(f"{root}/train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[begin:end]
    with gzip.open(f"{root}/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[begin:end]
    return x.astype(np.float32) / 255.0, y


def cross_entropy(logits, labels):
    top = logits.max(axis=1, keepdims=True)
    log_sum = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return float(np.mean(log_sum - logits[np.arange(len(labels)), labels]))


def validation(tuned_path, exported_path, begin, end, log_path):
    """The validation loss `smelt train --model=resnet.onnx` printed (its evaluation, with the
    running statistics its training steps updated) against the fine-tuned checkpoint's model
    in float64 on the same examples, and against the same weights with the statistics the
    file had before, which must give another loss."""
    _, tuned = read_checkpoint(tuned_path)
    _, exported = read_checkpoint(exported_path)
    # The imported model's checkpoint names its tensors as the file does: filters in ONNX's
    # [F, C, KH, KW], brought back to Smelt's HWIO for the reference.
    params = {k: v.transpose(2, 3, 1, 0) if v.ndim == 4 else v for k, v in tuned.items()}
    statistics = [k for k in exported if k.endswith(("/moving_mean", "/moving_variance"))]
    moved = sum(not np.array_equal(tuned[k], exported[k]) for k in statistics)
    print(f"running statistics updated: {moved} of {len(statistics)}")
    x, y = train_images(int(begin), int(end))
    want = cross_entropy(reference_logits("resnet", params, x), y)
    stale = cross_entropy(reference_logits("resnet", {**params, **{k: exported[k] for k in
                                                                   statistics}}, x), y)
    printed = float(re.search(r"val_loss: ([0-9.]+)", open(log_path).read()).group(1))
    print(f"validation loss: printed {printed:.4f}, float64 {want:.4f}, with the file's "
          f"statistics {stale:.4f}")
    if abs(printed - want) > 1e-4 + 1e-4 * want or abs(stale - want) < 1e-3 or moved == 0:
        sys.exit("the evaluation does not use the updated running statistics")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "export":
        export(*args)
    elif command == "images":
        images(int(args[0]), args[1])
    elif command == "check":
        check(*args)
    elif command == "validation":
        validation(*args)
    else:
        sys.exit(f"unknown command {command}")
