#!/usr/bin/env python3
"""Real-architecture ONNX models with random weights, for measuring `smelt import` and `smelt
run` on what users bring, without PyTorch, transformers, torchvision or a download.

Each model is written node by node in the op forms that PyTorch's TorchScript exporter
(torch.onnx.export, dynamo=False, opset 17, do_constant_folding=True, static shapes) emits for
it: torchvision's ResNet-50 in eval mode (BatchNorm folded into the Convs), Hugging Face's
GPT2LMHeadModel (eager attention, tied LM head) and BertModel (eager attention), with
input_ids only. The weights are random (normal * 0.02, He-scaled for convolutions), all
initializers, so values differ from the released checkpoints but shapes, ops and graph
structure are the real ones. Only ops in tests/onnx/claimed_ops.txt are used.

  python bench/onnx_zoo.py OUTDIR [--models resnet50,gpt2,bert] [--batch 1] [--seq 128] [--check]

writes OUTDIR/<model>.onnx and OUTDIR/<model>.input.npy (a random input, fixed seed: a float32
image for resnet50, int64 token ids for gpt2 and bert); with --check and onnxruntime
importable, also OUTDIR/<model>.ort.npy (ONNX Runtime's output on that input) and ONNX
Runtime's median latency over 10 runs after warm-up.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET, IR_VERSION = 17, 8
F32_MIN = float(np.finfo(np.float32).min)  # torch.finfo(float32).min, the masked-out score


class Graph:
    """Nodes and initializers of one model, named as the exporter names them: nodes by module
    scope (/transformer/h.0/attn/MatMul), values <node>_output_<i>, parameters by their
    state_dict names, folded constants onnx::<Op>_<n>."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.names = [], [], {}

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def param(self, name, shape, std=0.02):
        return self.init(name, self.rng.standard_normal(shape, dtype=np.float32) * std)

    def folded(self, op_type, array):
        """A constant the exporter's folding left as an initializer (onnx::MatMul_123)."""
        return self.init(self.unique(f"onnx::{op_type}"), array)

    def unique(self, base):
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def op(self, op_type, inputs, scope="", outputs=1, out=None, **attrs):
        name = self.unique(f"{scope}/{op_type}")
        outs = [out] if out else [f"{name}_output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, value, dtype=np.float32, scope=""):
        """A Constant node, as the exporter writes scalars and the shapes it folds."""
        return self.op("Constant", [], scope,
                       value=numpy_helper.from_array(np.array(value, dtype=dtype)))

    def ints(self, values, scope=""):
        return self.const(values, np.int64, scope)

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, producer_name="pytorch", producer_version="2.5.1",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        return model


# ---------------------------------------------------------------------------------------------
# Shared parts: layer norm, linear layers, GELUs, multi-head attention.

def layer_norm(g, x, prefix, dim, eps, out=None):
    scope = "/" + prefix.replace(".", "/")
    return g.op("LayerNormalization", [x, g.init(f"{prefix}.weight", np.ones(dim, np.float32)),
                                       g.param(f"{prefix}.bias", (dim,))],
                scope, out=out, axis=-1, epsilon=eps)


def linear(g, x, prefix, d_in, d_out):
    """nn.Linear on a 3-D input: MatMul by the weight's transpose, which constant folding stores
    as a [in, out] initializer, then Add(bias, .) in the exporter's operand order."""
    scope = "/" + prefix.replace(".", "/")
    y = g.op("MatMul", [x, g.folded("MatMul", g.rng.standard_normal((d_in, d_out),
                                                                    dtype=np.float32) * 0.02)],
             scope)
    return g.op("Add", [g.param(f"{prefix}.bias", (d_out,)), y], scope)


def conv1d(g, x, prefix, lead, d_in, d_out):
    """Hugging Face's Conv1D (weight [in, out]): torch.addmm(bias, x.view(-1, in), weight)
    then .view(*lead, out). addmm of two 2-D operands exports as Gemm, not MatMul + Add."""
    scope = "/" + prefix.replace(".", "/")
    x2 = g.op("Reshape", [x, g.ints([-1, d_in], scope)], scope)
    y = g.op("Gemm", [x2, g.param(f"{prefix}.weight", (d_in, d_out)),
                      g.param(f"{prefix}.bias", (d_out,))], scope, alpha=1.0, beta=1.0)
    return g.op("Reshape", [y, g.ints([*lead, d_out], scope)], scope)


def gelu_tanh(g, x, scope):
    """NewGELUActivation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    c = lambda v: g.const(v, scope=scope)
    cube = g.op("Mul", [g.op("Pow", [x, c(3.0)], scope), c(0.044715)], scope)
    inner = g.op("Mul", [g.op("Add", [x, cube], scope), c(math.sqrt(2.0 / math.pi))], scope)
    one_plus = g.op("Add", [g.op("Tanh", [inner], scope), c(1.0)], scope)
    return g.op("Mul", [g.op("Mul", [x, c(0.5)], scope), one_plus], scope)


def gelu_erf(g, x, scope):
    """The exporter's nn.functional.gelu (opset 17 has no Gelu op): x * (1 + erf(x/sqrt2)) * 0.5,
    in that order."""
    c = lambda v: g.const(v, scope=scope)
    erf = g.op("Erf", [g.op("Div", [x, c(math.sqrt(2.0))], scope)], scope)
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, c(1.0)], scope)], scope), c(0.5)],
                scope)


def attention(g, q, k, v, scope, batch, seq, heads, mask):
    """Eager multi-head attention as both models write it: view to heads and permute, scores
    q @ k^T / sqrt(head_dim), the model's mask, softmax, @ v, permute back and merge heads."""
    head_dim = 64

    def split(t):
        r = g.op("Reshape", [t, g.ints([batch, seq, heads, head_dim], scope)], scope)
        return g.op("Transpose", [r], scope, perm=[0, 2, 1, 3])

    q, k, v = split(q), split(k), split(v)
    kt = g.op("Transpose", [k], scope, perm=[0, 1, 3, 2])
    scores = g.op("MatMul", [q, kt], scope)
    scores = g.op("Div", [scores, g.const(math.sqrt(head_dim), scope=scope)], scope)
    probs = g.op("Softmax", [mask(scores)], scope, axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, v], scope)], scope, perm=[0, 2, 1, 3])
    return g.op("Reshape", [ctx, g.ints([batch, seq, heads * head_dim], scope)], scope)


# ---------------------------------------------------------------------------------------------
# ResNet-50 (torchvision), eval mode: each Conv + BatchNorm is one Conv with a bias.

def conv_bn(g, x, prefix, c_in, c_out, k, stride=1, relu=True, gain=2.0):
    scope = "/" + prefix.replace(".", "/")
    w = g.folded("Conv", g.rng.standard_normal((c_out, c_in, k, k), dtype=np.float32)
                 * np.float32(math.sqrt(gain / (c_in * k * k))))
    b = g.folded("Conv", g.rng.standard_normal(c_out, dtype=np.float32) * 0.02)
    y = g.op("Conv", [x, w, b], scope, dilations=[1, 1], group=1, kernel_shape=[k, k],
             pads=[k // 2] * 4, strides=[stride, stride])
    return g.op("Relu", [y], scope) if relu else y


def bottleneck(g, x, prefix, c_in, width, stride):
    out = conv_bn(g, x, f"{prefix}.conv1", c_in, width, 1)
    out = conv_bn(g, out, f"{prefix}.conv2", width, width, 3, stride)
    # A small gain on the block's last conv keeps the residual stream's scale bounded over 16
    # blocks (the trained network's last BatchNorm in a block does the same).
    out = conv_bn(g, out, f"{prefix}.conv3", width, width * 4, 1, relu=False, gain=0.25)
    identity = x
    if stride != 1 or c_in != width * 4:
        identity = conv_bn(g, x, f"{prefix}.downsample.0", c_in, width * 4, 1, stride,
                           relu=False, gain=1.0)
    scope = "/" + prefix.replace(".", "/")
    return g.op("Relu", [g.op("Add", [out, identity], scope)], scope)


def resnet50(g, batch, seq):
    x = conv_bn(g, "input", "conv1", 3, 64, 7, stride=2)
    x = g.op("MaxPool", [x], "/maxpool", ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[2, 2])
    c_in = 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512]), 1):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 1 else 1
            x = bottleneck(g, x, f"layer{stage}.{i}", c_in, width, stride)
            c_in = width * 4
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x], "/avgpool")], "", axis=1)
    y = g.op("Gemm", [x, g.param("fc.weight", (1000, 2048), 1 / math.sqrt(2048)),
                      g.param("fc.bias", (1000,))], "/fc", out="output",
             alpha=1.0, beta=1.0, transB=1)
    image = np.random.default_rng(1).standard_normal((batch, 3, 224, 224), dtype=np.float32)
    return (image, [("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
            [(y, TensorProto.FLOAT, [batch, 1000])])


# ---------------------------------------------------------------------------------------------
# GPT-2 small (GPT2LMHeadModel): 12 layers, 12 heads, d 768, vocab 50257, 1024 positions.

GPT2 = dict(vocab=50257, positions=1024, dim=768, heads=12, layers=12)


def gpt2_embed(g, batch, seq, cfg):
    """input_ids.view(-1, input_shape[-1]) with the size read from the graph (Shape, Gather,
    Unsqueeze, Concat), wte(ids) + wpe(arange(seq).unsqueeze(0))."""
    s = "/transformer"
    last = g.op("Gather", [g.op("Shape", ["input_ids"], s), g.ints(1, s)], s, axis=0)
    shape = g.op("Concat", [g.ints([-1], s), g.op("Unsqueeze", [last, g.ints([0], s)], s)], s,
                 axis=0)
    ids = g.op("Reshape", ["input_ids", shape], s)
    positions = g.op("Range", [g.ints(0, s), g.ints(seq, s), g.ints(1, s)], s)
    positions = g.op("Unsqueeze", [positions, g.ints([0], s)], s)
    wte = g.param("transformer.wte.weight", (cfg["vocab"], cfg["dim"]))
    wpe = g.param("transformer.wpe.weight", (cfg["positions"], cfg["dim"]), 0.01)
    tokens = g.op("Gather", [wte, ids], "/transformer/wte")
    return wte, g.op("Add", [tokens, g.op("Gather", [wpe, positions], "/transformer/wpe")], s)


def gpt2_block(g, h, i, batch, seq, causal, cfg):
    p, d = f"transformer.h.{i}", cfg["dim"]
    scope, lead = f"/transformer/h.{i}/attn", [batch, seq]
    a = layer_norm(g, h, f"{p}.ln_1", d, 1e-5)
    qkv = conv1d(g, a, f"{p}.attn.c_attn", lead, d, 3 * d)
    q, k, v = g.op("Split", [qkv, g.ints([d, d, d], scope)], scope, outputs=3, axis=2)

    def mask(scores):  # self.bias[:, :, k_len - q_len:k_len, :k_len], Where(., scores, min)
        rows = g.op("Slice", [causal, g.ints([0], scope), g.ints([seq], scope),
                               g.ints([2], scope), g.ints([1], scope)], scope)
        square = g.op("Slice", [rows, g.ints([0], scope), g.ints([seq], scope),
                                g.ints([3], scope), g.ints([1], scope)], scope)
        return g.op("Where", [square, scores, g.const(F32_MIN, scope=scope)], scope)

    ctx = attention(g, q, k, v, scope, batch, seq, cfg["heads"], mask)
    h = g.op("Add", [conv1d(g, ctx, f"{p}.attn.c_proj", lead, d, d), h],
             f"/transformer/h.{i}")
    m = layer_norm(g, h, f"{p}.ln_2", d, 1e-5)
    m = gelu_tanh(g, conv1d(g, m, f"{p}.mlp.c_fc", lead, d, 4 * d),
                  f"/transformer/h.{i}/mlp/act")
    m = conv1d(g, m, f"{p}.mlp.c_proj", lead, 4 * d, d)
    return g.op("Add", [h, m], f"/transformer/h.{i}")


def gpt2(g, batch, seq):
    cfg = GPT2
    wte, h = gpt2_embed(g, batch, seq, cfg)
    # The causal mask buffer (bool [1, 1, 1024, 1024]); each layer slices it to the sequence.
    # Hugging Face keeps one per layer; the exporter would fold each slice into its own
    # initializer, here all layers slice the one buffer.
    n = cfg["positions"]
    causal = g.init("transformer.h.0.attn.bias", np.tril(np.ones((1, 1, n, n), bool)))
    for i in range(cfg["layers"]):
        h = gpt2_block(g, h, i, batch, seq, causal, cfg)
    h = layer_norm(g, h, "transformer.ln_f", cfg["dim"], 1e-5)
    # The tied LM head: Linear without bias on a 3-D input is MatMul(h, Transpose(weight)), the
    # weight being wte, the initializer the embedding Gather reads. (Constant folding would
    # store the transpose as a second initializer; the Transpose of a constant is kept here
    # because it is what we want to measure.)
    wte_t = g.op("Transpose", [wte], "/lm_head", perm=[1, 0])
    logits = g.op("MatMul", [h, wte_t], "/lm_head", out="logits")
    ids = np.random.default_rng(1).integers(0, cfg["vocab"], (batch, seq), dtype=np.int64)
    return (ids, [("input_ids", TensorProto.INT64, [batch, seq])],
            [(logits, TensorProto.FLOAT, [batch, seq, cfg["vocab"]])])


# ---------------------------------------------------------------------------------------------
# BERT-base (BertModel): 12 layers, 12 heads, d 768, intermediate 3072, vocab 30522.

BERT = dict(vocab=30522, positions=512, types=2, dim=768, heads=12, layers=12, inner=3072)


def bert_embed(g, batch, seq, cfg):
    """word(ids) + token_type(zeros) + position(arange): the token-type and position ids are
    buffers sliced to the sequence (token types expanded to the batch)."""
    s, p, d = "/embeddings", "embeddings", cfg["dim"]

    def buffer_ids(name, values):  # self.<name>[:, :seq]
        return g.op("Slice", [g.init(name, values[None]), g.ints([0], s), g.ints([seq], s),
                              g.ints([1], s), g.ints([1], s)], s)

    types = g.op("Expand", [buffer_ids(f"{p}.token_type_ids",
                                       np.zeros(cfg["positions"], np.int64)),
                            g.ints([batch, seq], s)], s)
    positions = buffer_ids(f"{p}.position_ids", np.arange(cfg["positions"], dtype=np.int64))
    table = lambda name, rows: g.param(f"{p}.{name}.weight", (rows, d))
    x = g.op("Gather", [table("word_embeddings", cfg["vocab"]), "input_ids"],
             f"{s}/word_embeddings")
    x = g.op("Add", [x, g.op("Gather", [table("token_type_embeddings", cfg["types"]), types],
                             f"{s}/token_type_embeddings")], s)
    x = g.op("Add", [x, g.op("Gather", [table("position_embeddings", cfg["positions"]),
                                        positions], f"{s}/position_embeddings")], s)
    return layer_norm(g, x, f"{p}.LayerNorm", d, 1e-12)


def bert_layer(g, h, i, batch, seq, extended_mask, cfg, out=None):
    p, d = f"encoder.layer.{i}", cfg["dim"]
    scope = f"/encoder/layer.{i}/attention/self"
    q, k, v = (linear(g, h, f"{p}.attention.self.{n}", d, d) for n in ("query", "key", "value"))
    ctx = attention(g, q, k, v, scope, batch, seq, cfg["heads"],
                    lambda scores: g.op("Add", [scores, extended_mask], scope))
    a = g.op("Add", [linear(g, ctx, f"{p}.attention.output.dense", d, d), h],
             f"/encoder/layer.{i}/attention/output")
    a = layer_norm(g, a, f"{p}.attention.output.LayerNorm", d, 1e-12)
    inner = gelu_erf(g, linear(g, a, f"{p}.intermediate.dense", d, cfg["inner"]),
                     f"/encoder/layer.{i}/intermediate/intermediate_act_fn")
    o = g.op("Add", [linear(g, inner, f"{p}.output.dense", cfg["inner"], d), a],
             f"/encoder/layer.{i}/output")
    return layer_norm(g, o, f"{p}.output.LayerNorm", d, 1e-12, out)


def bert(g, batch, seq):
    cfg = BERT
    h = bert_embed(g, batch, seq, cfg)
    # The all-ones attention mask's (1 - mask[:, None, None, :]) * finfo.min, folded by the
    # exporter to a constant -0.0 [batch, 1, 1, seq] that every layer adds to its scores.
    extended = g.folded("Add", np.full((batch, 1, 1, seq), -0.0, np.float32))
    for i in range(cfg["layers"]):
        last = i == cfg["layers"] - 1
        h = bert_layer(g, h, i, batch, seq, extended, cfg, "last_hidden_state" if last else None)
    ids = np.random.default_rng(1).integers(0, cfg["vocab"], (batch, seq), dtype=np.int64)
    return (ids, [("input_ids", TensorProto.INT64, [batch, seq])],
            [(h, TensorProto.FLOAT, [batch, seq, cfg["dim"]])])


MODELS = {"resnet50": resnet50, "gpt2": gpt2, "bert": bert}


# ---------------------------------------------------------------------------------------------

def build(name, batch, seq):
    g = Graph(seed=0)
    data, inputs, outputs = MODELS[name](g, batch, seq)
    value_info = lambda specs: [helper.make_tensor_value_info(*s) for s in specs]
    model = g.model(f"torch_jit_{name}", value_info(inputs), value_info(outputs))
    onnx.checker.check_model(model)
    return model, inputs[0][0], data


def check_with_ort(path, input_name, data, out_path, runs=10):
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {input_name: data}
    result = session.run(None, feed)[0]
    np.save(out_path, result)
    session.run(None, feed)  # warm-up beyond the first run
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return ort.__version__, result, statistics.median(times)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--check", action="store_true",
                        help="run each model with onnxruntime and save its output")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    for name, cfg in (("gpt2", GPT2), ("bert", BERT)):
        if name in names and args.seq > cfg["positions"]:
            parser.error(f"--seq {args.seq} exceeds {name}'s {cfg['positions']} positions")
    os.makedirs(args.outdir, exist_ok=True)
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError:
        have_ort = False
        if args.check:
            print("onnxruntime is not importable: --check skipped", file=sys.stderr)
    for name in names:
        start = time.perf_counter()
        model, input_name, data = build(name, args.batch, args.seq)
        path = os.path.join(args.outdir, f"{name}.onnx")
        onnx.save(model, path)
        np.save(os.path.join(args.outdir, f"{name}.input.npy"), data)
        size, seconds = os.path.getsize(path) / 2**20, time.perf_counter() - start
        print(f"{name}: {path} ({size:.0f} MiB, {len(model.graph.node)} nodes, "
              f"{len(model.graph.initializer)} initializers) in {seconds:.1f} s")
        del model
        if args.check and have_ort:
            out = os.path.join(args.outdir, f"{name}.ort.npy")
            version, result, median = check_with_ort(path, input_name, data, out)
            print(f"  onnxruntime {version}: {out} {list(result.shape)}, "
                  f"|y| max {np.abs(result).max():.3g}, finite {np.isfinite(result).all()}, "
                  f"median {median * 1e3:.1f} ms over 10 runs")


if __name__ == "__main__":
    main(sys.argv[1:])
