#!/usr/bin/env python3
"""Writes Smelt's mini model zoo (tests/zoo): small versions of the architectures PyTorch and
Hugging Face users export (the library's own model classes where their constructors take a
width, the same layer kinds at tiny widths where they do not), random weights, each exported
with both of PyTorch's exporters as a user would call them:

  torchscript  torch.onnx.export(model, args, f, dynamo=False)    (the legacy exporter)
  dynamo       torch.onnx.export(model, args, f)                  (the default: dynamo=True,
                                                                   weights in model.onnx.data)

and ONNX Runtime's outputs on a random input stored beside each. tests/zoo/zoo.test imports,
runs (JIT and AOT) and compares them in CI; this script is not run there (it needs PyTorch,
torchvision, transformers, onnxscript and onnxruntime: bench/peers/setup.sh's venv).

  python tests/zoo/generate.py [OUTDIR = tests/zoo/models] [--models a,b] [--exporters ...]

OUTDIR/<model>.<exporter>/ holds model.onnx (and model.onnx.data), input_<name>.npy and
expected_<output>.npy.
"""
import argparse
import os
import shutil
import sys
import traceback

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

SEED = 20261127


def tiny_resnet():
    """torchvision's BasicBlock and Bottleneck (BatchNorm, residual adds, strided 1x1
    downsampling) in a ResNet stem -> stages -> avgpool -> fc, at widths 8-32."""
    from torchvision.models.resnet import BasicBlock, Bottleneck

    def down(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    return nn.Sequential(
        nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
        BasicBlock(8, 8), BasicBlock(8, 16, 2, down(8, 16, 2)),
        Bottleneck(16, 8, 2, down(16, 32, 2)),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)), (1, 3, 32, 32)


def torchvision_model(name):
    from torchvision import models
    from torchvision.models import convnext, efficientnet, regnet
    if name == "mobilenet_v2":
        setting = [[1, 8, 1, 1], [6, 12, 2, 2], [6, 16, 2, 2], [6, 24, 1, 1]]  # t, c, n, s
        return models.MobileNetV2(num_classes=10, inverted_residual_setting=setting), (1, 3, 32, 32)
    if name == "mobilenet_v3":
        setting, last = models.mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
        return models.MobileNetV3(setting, 64, num_classes=10), (1, 3, 32, 32)
    if name == "efficientnet":
        cfg = efficientnet.MBConvConfig
        setting = [cfg(1, 3, 1, 8, 8, 1), cfg(4, 3, 2, 8, 16, 1), cfg(4, 5, 2, 16, 24, 1)]
        return models.EfficientNet(setting, 0.2, num_classes=10, last_channel=64), (1, 3, 32, 32)
    if name == "densenet":
        return models.DenseNet(4, (2, 2), 8, num_classes=10), (1, 3, 32, 32)
    if name == "shufflenet":
        return models.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 64], num_classes=10), (1, 3, 32, 32)
    if name == "regnet":
        params = regnet.BlockParams.from_init_params(depth=3, w_0=8, w_a=8.0, w_m=2.0,
                                                     group_width=8)
        return models.RegNet(params, num_classes=10, stem_width=8), (1, 3, 32, 32)
    if name == "convnext":
        c = convnext.CNBlockConfig
        return models.ConvNeXt([c(16, 32, 1), c(32, None, 1)], num_classes=10), (1, 3, 32, 32)
    if name == "vit":
        return models.VisionTransformer(32, 8, 2, 2, 32, 64, num_classes=10), (1, 3, 32, 32)
    if name == "swin":
        return models.SwinTransformer([2, 2], 16, [2, 2], [2, 2], [4, 4],
                                      num_classes=10), (1, 3, 32, 32)
    raise KeyError(name)


def hf_model(name, exporter):
    """Hugging Face models at 2 layers, width 32; token ids (or features) as the input."""
    import transformers as hf
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, vocab_size=100, max_position_embeddings=64)
    if name == "bert":
        return hf.BertModel(hf.BertConfig(**common)), "ids"
    if name == "bert_masked":  # with the attention mask as an input, padding in one row
        return hf.BertModel(hf.BertConfig(**common)), "ids+mask"
    if name == "roberta":
        return hf.RobertaModel(hf.RobertaConfig(**common, pad_token_id=1)), "ids"
    if name == "distilbert":
        return hf.DistilBertModel(hf.DistilBertConfig(
            dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=100,
            max_position_embeddings=64)), "ids"
    if name == "gpt2":
        return hf.GPT2LMHeadModel(hf.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100,
                                                n_positions=64)), "ids"
    if name == "llama":
        # Grouped-query attention (one key/value head), which the TorchScript exporter cannot
        # export ("scaled_dot_product_attention ... enable_gqa"): there, one per query head.
        kv_heads = 1 if exporter == "dynamo" else 2
        return hf.LlamaForCausalLM(hf.LlamaConfig(**common, num_key_value_heads=kv_heads)), "ids"
    if name == "llama_masked":
        return hf.LlamaModel(hf.LlamaConfig(**common, num_key_value_heads=2)), "ids+mask"
    if name == "t5_encoder":
        return hf.T5EncoderModel(hf.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                             num_heads=2, vocab_size=100)), "ids"
    if name == "vit_hf":
        return hf.ViTModel(hf.ViTConfig(**{k: v for k, v in common.items()
                                           if k not in ("vocab_size", "max_position_embeddings")},
                                        image_size=32, patch_size=8)), "image"
    if name == "whisper_encoder":
        config = hf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                  decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                                  encoder_ffn_dim=64, num_mel_bins=16, max_source_positions=32,
                                  vocab_size=100, pad_token_id=1, bos_token_id=2,
                                  eos_token_id=3, decoder_start_token_id=2)
        return hf.WhisperModel(config).get_encoder(), "features"
    if name == "videomae":  # tubelets of 2 frames x 8 x 8 pixels: a strided Conv3d
        return hf.VideoMAEModel(hf.VideoMAEConfig(
            **{k: v for k, v in common.items() if k not in ("vocab_size", "max_position_embeddings")},
            image_size=32, patch_size=8, num_frames=4, tubelet_size=2)), "video"
    raise KeyError(name)


def tiny_video():
    """The layer kinds of torchvision's video ResNets (r3d, mc3, r2plus1d) and of 3-D U-Nets at
    widths 4-16: a (3, 7, 7) stem strided in space, BatchNorm3d, MaxPool3d, a 3x3x3 residual
    block, a (2+1)-D block (spatial 1x3x3 then temporal 3x1x1), a grouped convolution, an
    average pool that counts no padding, a strided ConvTranspose3d, the global pool and a
    classifier."""
    from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D, Conv3DSimple

    class Video(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv3d(3, 8, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                                      nn.BatchNorm3d(8), nn.ReLU(),
                                      nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)))
            self.block = BasicBlock(8, 8, Conv3DSimple)
            self.factored = BasicBlock(8, 8, Conv2Plus1D)
            self.grouped = nn.Sequential(nn.Conv3d(8, 16, 3, 2, 1, groups=4), nn.ReLU(),
                                         nn.AvgPool3d(2, 1, 1, ceil_mode=True,
                                                      count_include_pad=False))
            self.up = nn.ConvTranspose3d(16, 8, 3, 2, 1, output_padding=1)
            self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x):
            return self.head(self.up(self.grouped(self.factored(self.block(self.stem(x))))))

    return Video(), (1, 3, 4, 32, 32)


def tiny_stn():
    """A spatial transformer (Jaderberg et al.): a localization network predicts an affine
    transform (initialized near the identity), F.affine_grid makes its sampling grid and
    F.grid_sample warps the image (bilinear, zeros padding); a second warp samples bicubic
    with reflection padding and aligned corners, and a small classifier reads the result."""
    import torch.nn.functional as F

    class Stn(nn.Module):
        def __init__(self):
            super().__init__()
            self.localize = nn.Sequential(nn.Conv2d(3, 8, 5, 2, 2), nn.ReLU(),
                                          nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                                          nn.Linear(128, 6))
            with torch.no_grad():
                self.localize[-1].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
            self.head = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x):
            theta = self.localize(x).view(-1, 2, 3)
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            warped = F.grid_sample(x, grid, "bilinear", "zeros", align_corners=False)
            grid2 = F.affine_grid(1.2 * theta, [x.shape[0], 3, 24, 24], align_corners=True)
            warped = F.grid_sample(warped, grid2, "bicubic", "reflection", align_corners=True)
            return self.head(warped)

    return Stn(), (1, 3, 32, 32)


def tiny_recurrent():
    """torch.nn's recurrent layers, which both exporters write as ONNX LSTM and GRU nodes: an
    embedding, a 2-layer bidirectional LSTM, a GRU over its outputs and a linear head per step."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.lstm = nn.LSTM(16, 12, num_layers=2, bidirectional=True, batch_first=True)
            self.gru = nn.GRU(24, 16, batch_first=True)
            self.head = nn.Linear(16, 5)

        def forward(self, ids):
            return self.head(self.gru(self.lstm(self.embed(ids))[0])[0])

    return Tagger()


TORCHVISION = ["resnet", "mobilenet_v2", "mobilenet_v3", "efficientnet", "densenet",
               "shufflenet", "regnet", "convnext", "vit", "swin"]
HF = ["bert", "bert_masked", "distilbert", "roberta", "gpt2", "llama", "llama_masked",
      "t5_encoder", "vit_hf", "whisper_encoder"]
VIDEO = ["video3d", "videomae"]
# Each group after the ones before it, so the seeds of the models above stay as they were.
LATER = ["stn", "recurrent"]
# Quantized by ONNX Runtime's quantizer after the export, as users shrink a model: BERT by
# quantize_dynamic (int8 weights, DynamicQuantizeLinear + MatMulInteger), the ResNet by
# quantize_static in the QDQ format (QuantizeLinear/DequantizeLinear around every convolution).
QUANTIZED = ["bert_int8", "resnet_qdq"]
MODELS = TORCHVISION + HF + VIDEO + LATER + QUANTIZED
EXPORTERS = ["torchscript", "dynamo"]


class Logits(nn.Module):
    """A Hugging Face model returning its first output as a tensor (the exporters flatten a
    ModelOutput into all its fields, which is not what a user deploys)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        out = self.model(*args)
        return out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))


def build(name, exporter, rng):
    """(module, example inputs as NumPy arrays by name)."""
    torch.manual_seed(SEED)
    model, inputs = build_model(name, exporter, rng)
    # Initializers leave zeros (biases, torchvision ViT's head) and ones (norms' scales), which
    # would hide a bias added twice or a scale never applied: every parameter gets noise.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model, inputs


def build_model(name, exporter, rng):
    if name == "resnet":
        model, shape = tiny_resnet()
    elif name == "video3d":
        model, shape = tiny_video()
    elif name == "stn":
        model, shape = tiny_stn()
    elif name == "recurrent":
        return tiny_recurrent().eval(), {"input_ids": rng.integers(0, 100, (2, 12)).astype(np.int64)}
    elif name in TORCHVISION:
        model, shape = torchvision_model(name)
    else:
        model, kind = hf_model(name, exporter)
        model = Logits(model)
        if kind == "ids":
            return model.eval(), {"input_ids": rng.integers(0, 100, (1, 16)).astype(np.int64)}
        if kind == "ids+mask":
            mask = np.ones((2, 16), np.int64)
            mask[1, 11:] = 0  # the second sequence is padded
            return model.eval(), {"input_ids": rng.integers(0, 100, (2, 16)).astype(np.int64),
                                  "attention_mask": mask}
        if kind == "image":
            return model.eval(), {"pixel_values": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
        if kind == "video":  # [batch, frames, channels, height, width]
            return model.eval(), {"pixel_values": rng.standard_normal((1, 4, 3, 32, 32)).astype(np.float32)}
        return model.eval(), {"input_features": rng.standard_normal((1, 16, 64)).astype(np.float32)}
    # BatchNorm statistics that are not 0 and 1, as after training.
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval(), {"image": rng.standard_normal(shape).astype(np.float32)}


def quantize_model(source, target, kind, inputs, rng):
    """Writes `source` quantized as ONNX Runtime's quantizer does it for users to `target`:
    `dynamic` (quantize_dynamic: int8 weights, DynamicQuantizeLinear + MatMulInteger), `qdq` or
    `qoperator` (quantize_static, per channel, calibrated on 8 inputs near `inputs`, their float
    ones moved by noise from `rng`: QuantizeLinear/DequantizeLinear pairs, or QLinearConv,
    QLinearMatMul and com.microsoft's QLinear ops). bench/peers' exports.py and zoo.py use it too."""
    from onnxruntime import quantization as q
    if kind == "dynamic":
        q.quantize_dynamic(source, target, weight_type=q.QuantType.QInt8)
        return

    class Calibration(q.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{k: (v + 0.1 * rng.standard_normal(v.shape)).astype(v.dtype)
                                if v.dtype.kind == "f" else v for k, v in inputs.items()}
                               for _ in range(8)])

        def get_next(self):
            return next(self.feeds, None)
    formats = {"qdq": q.QuantFormat.QDQ, "qoperator": q.QuantFormat.QOperator}
    q.quantize_static(source, target, Calibration(), quant_format=formats[kind], per_channel=True,
                      weight_type=q.QuantType.QInt8, activation_type=q.QuantType.QUInt8)


def quantize(path, name, inputs, rng):
    """Replaces the model at `path` by its quantized form (QUANTIZED)."""
    folder = os.path.dirname(path)
    float_path = f"{folder}/float.onnx"
    os.rename(path, float_path)
    quantize_model(float_path, path, "dynamic" if name.endswith("_int8") else "qdq", inputs, rng)
    for f in os.listdir(folder):  # the float model and its external data
        if f != "model.onnx":
            os.remove(f"{folder}/{f}")


def export(name, exporter, out):
    rng = np.random.default_rng(SEED + MODELS.index(name))
    model, inputs = build(name.split("_")[0] if name in QUANTIZED else name, exporter, rng)
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    folder = f"{out}/{name}.{exporter}"
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    path = f"{folder}/model.onnx"
    # Not under torch.no_grad(): there, torchvision's attention takes a fused fast path
    # (aten::_native_multi_head_attention) that the TorchScript exporter cannot export.
    if exporter == "dynamo":
        torch.onnx.export(model, args, path, input_names=list(inputs), output_names=["output"])
    else:
        torch.onnx.export(model, args, path, input_names=list(inputs), output_names=["output"],
                          dynamo=False)
    options = ort.SessionOptions()
    if name in QUANTIZED:
        quantize(path, name, inputs, rng)
        # The graph as written: ONNX Runtime's optimized session runs fused integer kernels
        # whose roundings differ from it (and by a quantization level, from each other).
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
    results = session.run(None, feeds)
    for k, v in feeds.items():
        np.save(f"{folder}/input_{k}.npy", v)
    for o, v in zip(session.get_outputs(), results):
        np.save(f"{folder}/expected_{o.name}.npy", v)
    reference = model(*args).detach()  # for a quantized model, the quantization error too
    error = np.linalg.norm(results[0] - reference.numpy()) / np.linalg.norm(reference.numpy())
    size = sum(os.path.getsize(f"{folder}/{f}") for f in os.listdir(folder))
    print(f"{name}.{exporter}: {size / 1024:.0f} KiB, ORT vs PyTorch relative L2 {error:.1e}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "models"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    a = parser.parse_args()
    failed = 0
    for name in a.models.split(","):
        for exporter in a.exporters.split(","):
            try:
                export(name, exporter, a.out)
            except Exception:
                shutil.rmtree(f"{a.out}/{name}.{exporter}", ignore_errors=True)
                failed += 1
                print(f"{name}.{exporter}: EXPORT FAILED", file=sys.stderr)
                traceback.print_exc()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
