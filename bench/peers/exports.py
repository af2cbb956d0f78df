#!/usr/bin/env python3
"""Models outside the zoo, exported as their users export them (torch.onnx.export, dynamo=True),
each run by `smelt run --no-cache` and by ONNX Runtime on the same file and input, and compared
(relative L2 of the first output): Hugging Face decoders, encoders, vision, audio and video
models at small widths, torchvision's classification, segmentation and video models at full
size, and a 3-D U-Net. A sweep for what a user would hit (bench/RESULTS.md, thirty-first
session), not a benchmark (bench/peers/zoo.py times models) and not run in CI (it needs
bench/peers/setup.sh's venv):

  python bench/peers/exports.py [--smelt build/bin/smelt] [--out /tmp/smelt-exports] NAME...

With --quantize, the comparison is on the exported model quantized by ONNX Runtime's quantizer
(dynamic, or static in the QDQ or QOperator format); --levels also prints, for every
QuantizeLinear and DynamicQuantizeLinear, how many of its elements differ from ONNX Runtime's
unoptimized session's and by how many levels.

Each line says `NAME: ok rel.L2 ...`, `WRONG ...`, or where it stopped (the export, ONNX
Runtime, Smelt's error). NAME is one of build()'s; `all` runs them all.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "zoo"))
from generate import Logits, quantize_model  # noqa: E402

SMELT = "build/bin/smelt"
OUT = "/tmp/smelt-exports"
DYNAMO = True
QUANTIZE = None
LEVELS = False

NAMES = ["mistral", "qwen2", "phi3", "gemma", "gpt_neox", "opt", "bloom", "falcon", "albert",
         "electra", "deberta_v2", "xlm_roberta", "mobilebert", "clip_text", "clip_vision", "beit",
         "deit", "dinov2", "bart", "t5", "googlenet", "inception_v3", "squeezenet", "alexnet",
         "vgg11", "mnasnet", "efficientnet_v2_s", "maxvit_t", "resnext50", "mobilenet_v3_large",
         "swin_v2_t", "vit_b_32", "regnet_x_400mf", "deeplabv3_mnv3", "lraspp", "segformer",
         "mobilevit", "wav2vec2", "hubert", "convnext_hf", "swin_hf", "resnet_hf", "yolos",
         "r3d_18", "mc3_18", "r2plus1d_18", "s3d", "swin3d_t", "mvit_v2_s", "videomae", "unet3d",
         "squeezebert", "convbert", "roformer", "mpnet", "nystromformer", "funnel", "layoutlm",
         "data2vec_text", "canine", "megatron_bert", "levit", "poolformer", "convnextv2", "pvt",
         "cvt", "bit", "mobilenet_v2_hf", "regnet_hf", "data2vec_vision", "swiftformer",
         "focalnet", "siglip_vision", "vitmae", "hiera", "dpt", "glpn", "timesformer", "sew",
         "data2vec_audio", "encodec", "lstm_tagger", "gru_encoder", "rnn_relu", "lstm_proj",
         "deformable_detr", "spectrogram"]


def build(name, rng):
    """(module, {input name: array}) for `name`, random weights."""
    import torchvision.models as tv
    import transformers as hf
    img = lambda s=224: {"image": rng.standard_normal((1, 3, s, s)).astype(np.float32)}
    ids = lambda n=32, v=1000: {"input_ids": rng.integers(0, v, (1, n)).astype(np.int64)}
    TV = {"googlenet": lambda: tv.googlenet(aux_logits=False, init_weights=True),
          "inception_v3": lambda: tv.inception_v3(aux_logits=False, init_weights=True),
          "squeezenet": tv.squeezenet1_0, "alexnet": tv.alexnet, "vgg11": tv.vgg11,
          "mnasnet": tv.mnasnet0_5, "efficientnet_v2_s": tv.efficientnet_v2_s,
          "maxvit_t": tv.maxvit_t, "resnext50": tv.resnext50_32x4d,
          "mobilenet_v3_large": tv.mobilenet_v3_large, "swin_v2_t": tv.swin_v2_t,
          "vit_b_32": tv.vit_b_32, "regnet_x_400mf": tv.regnet_x_400mf,
          "deeplabv3_mnv3": lambda: tv.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None),
          "lraspp": lambda: tv.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
          "r3d_18": tv.video.r3d_18, "mc3_18": tv.video.mc3_18, "r2plus1d_18": tv.video.r2plus1d_18,
          "s3d": tv.video.s3d, "swin3d_t": tv.video.swin3d_t, "mvit_v2_s": tv.video.mvit_v2_s}
    if name in TV:
        if name in ("r3d_18", "mc3_18", "r2plus1d_18", "s3d", "swin3d_t", "mvit_v2_s"):
            size = {"s3d": 224, "swin3d_t": 224, "mvit_v2_s": 224}.get(name, 112)
            frames = {"mvit_v2_s": 16}.get(name, 8)
            return TV[name](), {"video": rng.standard_normal((1, 3, frames, size, size)).astype(np.float32)}
        return TV[name](), img(299 if name == "inception_v3" else 224)
    tiny = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4)
    if name == "mistral":
        return Logits(hf.MistralForCausalLM(hf.MistralConfig(num_key_value_heads=2, vocab_size=1000, sliding_window=16, **tiny))), ids()
    if name == "qwen2":
        return Logits(hf.Qwen2ForCausalLM(hf.Qwen2Config(num_key_value_heads=2, vocab_size=1000, **tiny))), ids()
    if name == "phi3":
        return Logits(hf.Phi3ForCausalLM(hf.Phi3Config(num_key_value_heads=2, vocab_size=1000, pad_token_id=0, **tiny))), ids()
    if name == "gemma":
        return Logits(hf.GemmaForCausalLM(hf.GemmaConfig(num_key_value_heads=1, head_dim=32, vocab_size=1000, **tiny))), ids()
    if name == "gpt_neox":
        return Logits(hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(vocab_size=1000, rotary_pct=0.25, **tiny))), ids()
    if name == "opt":
        return Logits(hf.OPTForCausalLM(hf.OPTConfig(vocab_size=1000, hidden_size=128, ffn_dim=256, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=128))), ids()
    if name == "bloom":
        return Logits(hf.BloomForCausalLM(hf.BloomConfig(vocab_size=1000, hidden_size=128, n_layer=2, n_head=4))), ids()
    if name == "falcon":
        return Logits(hf.FalconForCausalLM(hf.FalconConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4))), ids()
    if name == "albert":
        return Logits(hf.AlbertModel(hf.AlbertConfig(vocab_size=1000, embedding_size=64, **tiny))), ids()
    if name == "electra":
        return Logits(hf.ElectraModel(hf.ElectraConfig(vocab_size=1000, embedding_size=64, **tiny))), ids()
    if name == "deberta_v2":
        return Logits(hf.DebertaV2Model(hf.DebertaV2Config(vocab_size=1000, **tiny))), ids()
    if name == "xlm_roberta":
        return Logits(hf.XLMRobertaModel(hf.XLMRobertaConfig(vocab_size=1000, **tiny))), ids()
    if name == "mobilebert":
        return Logits(hf.MobileBertModel(hf.MobileBertConfig(vocab_size=1000))), ids()
    if name == "clip_text":
        return Logits(hf.CLIPTextModel(hf.CLIPTextConfig(vocab_size=1000, **tiny))), ids()
    if name == "clip_vision":
        return Logits(hf.CLIPVisionModel(hf.CLIPVisionConfig(**tiny))), {"pixel_values": img()["image"]}
    if name == "beit":
        return Logits(hf.BeitModel(hf.BeitConfig(**tiny))), {"pixel_values": img()["image"]}
    if name == "deit":
        return Logits(hf.DeiTModel(hf.DeiTConfig(**tiny))), {"pixel_values": img()["image"]}
    if name == "segformer":
        return Logits(hf.SegformerForSemanticSegmentation(hf.SegformerConfig())), {"pixel_values": img(128)["image"]}
    if name == "mobilevit":
        return Logits(hf.MobileViTModel(hf.MobileViTConfig())), {"pixel_values": img(256)["image"]}
    if name == "dinov2":
        return Logits(hf.Dinov2Model(hf.Dinov2Config(**tiny))), {"pixel_values": img()["image"]}
    if name == "wav2vec2":
        return Logits(hf.Wav2Vec2Model(hf.Wav2Vec2Config(**tiny))), {"input_values": rng.standard_normal((1, 16000)).astype(np.float32)}
    if name == "hubert":
        return Logits(hf.HubertModel(hf.HubertConfig(**tiny))), {"input_values": rng.standard_normal((1, 16000)).astype(np.float32)}
    if name == "bart":
        return Logits(hf.BartModel(hf.BartConfig(vocab_size=1000, d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256))), {**ids(), "decoder_input_ids": rng.integers(0, 1000, (1, 16)).astype(np.int64)}
    if name == "t5":
        return Logits(hf.T5Model(hf.T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4))), {**ids(), "decoder_input_ids": rng.integers(0, 1000, (1, 16)).astype(np.int64)}
    if name == "convnext_hf":
        return Logits(hf.ConvNextModel(hf.ConvNextConfig())), {"pixel_values": img()["image"]}
    if name == "swin_hf":
        return Logits(hf.SwinModel(hf.SwinConfig())), {"pixel_values": img()["image"]}
    if name == "resnet_hf":
        return Logits(hf.ResNetModel(hf.ResNetConfig())), {"pixel_values": img()["image"]}
    if name == "unet3d":
        class UNet3d(nn.Module):
            def __init__(self):
                super().__init__()
                self.down = nn.Sequential(nn.Conv3d(2, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU())
                self.pool = nn.MaxPool3d(2, ceil_mode=True)
                self.mid = nn.Sequential(nn.Conv3d(8, 16, (3, 3, 3), padding=(1, 1, 1), groups=2), nn.ReLU(),
                                         nn.AvgPool3d(3, stride=1, padding=1, count_include_pad=False))
                self.up = nn.ConvTranspose3d(16, 8, 2, stride=2, output_padding=(1, 0, 1))
                self.head = nn.Conv3d(16, 3, 1)
            def forward(self, x):
                a = self.down(x)
                b = self.up(self.mid(self.pool(a)))
                b = b[:, :, :a.shape[2], :a.shape[3], :a.shape[4]]
                return self.head(torch.cat([a, b], 1))
        return UNet3d(), {"volume": rng.standard_normal((1, 2, 9, 16, 15)).astype(np.float32)}
    if name == "videomae":
        return Logits(hf.VideoMAEModel(hf.VideoMAEConfig(num_frames=8, **tiny))), {"pixel_values": rng.standard_normal((1, 8, 3, 224, 224)).astype(np.float32)}
    pixels = lambda s=224: {"pixel_values": img(s)["image"]}
    audio = {"input_values": rng.standard_normal((1, 16000)).astype(np.float32)}
    text = {"squeezebert": (hf.SqueezeBertModel, hf.SqueezeBertConfig),
            "convbert": (hf.ConvBertModel, hf.ConvBertConfig),
            "roformer": (hf.RoFormerModel, hf.RoFormerConfig),
            "mpnet": (hf.MPNetModel, hf.MPNetConfig),
            "nystromformer": (hf.NystromformerModel, hf.NystromformerConfig),
            "funnel": (hf.FunnelModel, hf.FunnelConfig),
            "layoutlm": (hf.LayoutLMModel, hf.LayoutLMConfig),
            "data2vec_text": (hf.Data2VecTextModel, hf.Data2VecTextConfig),
            "canine": (hf.CanineModel, hf.CanineConfig),
            "megatron_bert": (hf.MegatronBertModel, hf.MegatronBertConfig)}
    if name in text:
        model_cls, config_cls = text[name]
        extra = {} if name in ("funnel", "canine") else {"vocab_size": 1000}
        if name == "funnel":
            config = config_cls(vocab_size=1000, d_model=128, n_head=4, d_head=32, d_inner=256,
                                block_sizes=[1, 1])
        elif name == "canine":
            config = config_cls(**tiny)
            return Logits(model_cls(config)), ids(32, 1000)
        else:
            config = config_cls(**extra, **dict(tiny, embedding_size=128)) if name == "squeezebert" \
                else config_cls(**extra, **tiny)
        return Logits(model_cls(config)), ids()
    vision = {"levit": (hf.LevitModel, hf.LevitConfig, {}),
              "poolformer": (hf.PoolFormerModel, hf.PoolFormerConfig, {}),
              "convnextv2": (hf.ConvNextV2Model, hf.ConvNextV2Config, {}),
              "pvt": (hf.PvtModel, hf.PvtConfig, {}),
              "cvt": (hf.CvtModel, hf.CvtConfig, {}),
              "bit": (hf.BitModel, hf.BitConfig, {}),
              "mobilenet_v2_hf": (hf.MobileNetV2Model, hf.MobileNetV2Config, {}),
              "regnet_hf": (hf.RegNetModel, hf.RegNetConfig, {}),
              "data2vec_vision": (hf.Data2VecVisionModel, hf.Data2VecVisionConfig, tiny),
              "swiftformer": (hf.SwiftFormerModel, hf.SwiftFormerConfig, {}),
              "focalnet": (hf.FocalNetModel, hf.FocalNetConfig, {}),
              "siglip_vision": (hf.SiglipVisionModel, hf.SiglipVisionConfig, tiny),
              "hiera": (hf.HieraModel, hf.HieraConfig, {}),
              "dpt": (hf.DPTForDepthEstimation, hf.DPTConfig, dict(tiny, num_hidden_layers=4)),
              "glpn": (hf.GLPNForDepthEstimation, hf.GLPNConfig, {}),
              "timesformer": (hf.TimesformerModel, hf.TimesformerConfig, dict(tiny, num_frames=4))}
    if name in vision:
        model_cls, config_cls, kw = vision[name]
        if name == "timesformer":
            return Logits(model_cls(config_cls(**kw))), {"pixel_values": rng.standard_normal((1, 4, 3, 224, 224)).astype(np.float32)}
        return Logits(model_cls(config_cls(**kw))), pixels()
    if name == "sew":
        return Logits(hf.SEWModel(hf.SEWConfig(**tiny))), audio
    if name == "data2vec_audio":
        return Logits(hf.Data2VecAudioModel(hf.Data2VecAudioConfig(**tiny))), audio
    if name == "encodec":
        return Logits(hf.EncodecModel(hf.EncodecConfig())), {"input_values": rng.standard_normal((1, 1, 8000)).astype(np.float32)}
    if name in ("lstm_tagger", "gru_encoder", "rnn_relu", "lstm_proj"):
        class Recurrent(nn.Module):
            """Embedding, a recurrent stack, a linear head: a tagger or a sequence encoder."""
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(1000, 64)
                self.rnn = {"lstm_tagger": lambda: nn.LSTM(64, 96, num_layers=2, bidirectional=True, batch_first=True),
                            "gru_encoder": lambda: nn.GRU(64, 128, num_layers=2, batch_first=False),
                            "rnn_relu": lambda: nn.RNN(64, 80, nonlinearity="relu", bidirectional=True, batch_first=True),
                            "lstm_proj": lambda: nn.LSTM(64, 96, proj_size=48, batch_first=True)}[name]()
                out = self.rnn.hidden_size * (2 if self.rnn.bidirectional else 1)
                if name == "lstm_proj":
                    out = 48
                self.head = nn.Linear(out, 17)
            def forward(self, ids):
                x = self.embed(ids)
                if not self.rnn.batch_first:
                    x = x.transpose(0, 1)
                y = self.rnn(x)[0]
                if not self.rnn.batch_first:
                    y = y.transpose(0, 1)
                return self.head(y)
        return Recurrent(), {"ids": rng.integers(0, 1000, (4, 40)).astype(np.int64)}
    if name == "vitmae":
        class Reconstruction(nn.Module):
            """The pre-training head's reconstructed patches. With mask_ratio 0 every patch is
            kept, and the decoder puts the shuffled patches back in order: the output does not
            depend on the random noise (RandomUniformLike) that shuffles them."""
            def __init__(self, model):
                super().__init__()
                self.model = model
            def forward(self, x):
                return self.model(x).logits
        config = hf.ViTMAEConfig(**tiny, mask_ratio=0.0, decoder_hidden_size=64,
                                 decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
                                 decoder_intermediate_size=128)
        return Reconstruction(hf.ViTMAEForPreTraining(config)), pixels()
    if name == "deformable_detr":  # multi-scale deformable attention: GridSample
        class Hidden(nn.Module):
            """The decoder's last hidden state (the output's first field is the reference
            points, computed from the queries alone)."""
            def __init__(self, model):
                super().__init__()
                self.model = model
            def forward(self, x):
                return self.model(x).last_hidden_state
        backbone = hf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                   out_features=["stage2", "stage3", "stage4"])
        config = hf.DeformableDetrConfig(d_model=32, encoder_layers=1, decoder_layers=1,
                                         encoder_attention_heads=2, decoder_attention_heads=2,
                                         encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
                                         use_timm_backbone=False, backbone_config=backbone,
                                         num_feature_levels=3, encoder_n_points=2, decoder_n_points=2)
        return Hidden(hf.DeformableDetrModel(config)), {"pixel_values": img(64)["image"]}
    if name == "spectrogram":  # torch.stft -> ONNX STFT, a log power spectrum, a linear layer
        class Spectrogram(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("window", torch.hann_window(400))
                self.head = nn.Linear(201, 32)
            def forward(self, audio):
                z = torch.stft(audio, n_fft=400, hop_length=160, window=self.window, center=False,
                               return_complex=True)
                power = torch.view_as_real(z).pow(2).sum(-1)
                return self.head(torch.log(power + 1e-6).transpose(1, 2))
        return Spectrogram(), {"audio": rng.standard_normal((2, 16000)).astype(np.float32)}
    if name == "yolos":
        return Logits(hf.YolosModel(hf.YolosConfig(**tiny, image_size=[256, 256]))), {"pixel_values": img(256)["image"]}
    raise KeyError(name)

def quantized(model, inputs, rng):
    """`model` quantized by ONNX Runtime's quantizer in the QUANTIZE way (tests/zoo/generate.py's
    quantize_model), once: the quantized file's path."""
    out = model.replace(".onnx", f"_{QUANTIZE}.onnx")
    if not os.path.exists(out):
        quantize_model(model, out, QUANTIZE, inputs, rng)
    return out


def run(name):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    folder = f"{OUT}/{name}"
    os.makedirs(folder, exist_ok=True)
    if not os.path.exists(f"{folder}/model.onnx"):
        model, inputs = build(name, rng)
        model.eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        for k, v in inputs.items():
            np.save(f"{folder}/input_{k}.npy", v)
        args = tuple(torch.from_numpy(v) for v in inputs.values())
        try:
            torch.onnx.export(model, args, f"{folder}/model.onnx", input_names=list(inputs),
                              output_names=["output"], dynamo=DYNAMO)
        except Exception as e:
            return f"export failed: {str(e).splitlines()[0][:200]}"
    import onnxruntime as ort
    inputs = {f[6:-4]: np.load(f"{folder}/{f}") for f in sorted(os.listdir(folder)) if f.startswith("input_")}
    model = f"{folder}/model.onnx"
    if QUANTIZE:
        try:
            model = quantized(model, inputs, rng)
        except Exception as e:
            return f"quantization failed: {str(e).splitlines()[0][:200]}"
    try:
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    except Exception as e:
        return f"ort failed: {str(e)[:200]}"
    args = [f"--input={k}={folder}/input_{k}.npy" for k in inputs]
    p = subprocess.run([SMELT, "run", model, *args, "--no-cache", "--output-dir", f"{folder}/smelt"],
                       capture_output=True, text=True)
    if p.returncode:
        return "smelt failed: " + " | ".join(p.stderr.strip().splitlines()[-3:])[:600]
    got = np.load(f"{folder}/smelt/output.npy")
    if got.shape != want.shape:
        return f"shape {got.shape} vs ort {want.shape}"
    rel = relative(got, want)
    if not QUANTIZE:
        return f"ok rel.L2 {rel:.2e}" if rel < 1e-4 else f"WRONG rel.L2 {rel:.2e}"
    # A quantized model turns a last-bit difference in a float op into a whole quantization
    # level, and a level into a new dynamic range downstream: ONNX Runtime's own sessions with
    # and without graph optimizations (QLinearConv on integers, or the QDQ graph as written)
    # differ so. Say how far Smelt is from each, and how far quantization moved the output.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    literal = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    floats = ort.InferenceSession(f"{folder}/model.onnx",
                                  providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    verdict = "ok" if min(rel, relative(got, literal)) < 1e-4 else "differs"
    if LEVELS:
        levels(model, inputs, folder)
    return (f"{verdict} rel.L2 {rel:.2e}, {relative(got, literal):.2e} from ORT without graph "
            f"optimizations (ORT's two differ by {relative(want, literal):.2e}; quantization "
            f"moved ORT's output by {relative(want, floats):.2e})")


def levels(model, inputs, folder):
    """Every QuantizeLinear and DynamicQuantizeLinear result of `model`, Smelt's against ONNX
    Runtime's unoptimized session's: how many elements differ and by how many levels, in graph
    order, to find where two runs of a quantized model part."""
    import onnx
    import onnxruntime as ort
    m = onnx.load(model)
    initializers = {t.name: t.data_type for t in m.graph.initializer}
    nodes = [n for n in m.graph.node if n.op_type in ("QuantizeLinear", "DynamicQuantizeLinear")]
    del m.graph.output[1:]
    for n in nodes:
        zero_point = n.input[2] if len(n.input) > 2 else ""
        m.graph.output.append(onnx.helper.make_tensor_value_info(
            n.output[0], initializers.get(zero_point, onnx.TensorProto.UINT8), None))
    path = f"{folder}/levels.onnx"
    onnx.save(m, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, inputs)
    args = [f"--input={k}={folder}/input_{k}.npy" for k in inputs]
    subprocess.run([SMELT, "run", path, *args, "--no-cache", "--output-dir", f"{folder}/levels"],
                   capture_output=True, check=True)
    for n, w in zip(nodes, want[1:]):
        d = np.abs(np.load(f"{folder}/levels/{n.output[0]}.npy").astype(np.int64) - w)
        print(f"  {n.output[0][:48]:48s} {np.count_nonzero(d):8d} of {d.size:8d} differ, "
              f"by at most {d.max()}")


def relative(got, want):
    return np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30)

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--smelt", default=SMELT)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--torchscript", action="store_true",
                        help="export with the TorchScript exporter (dynamo=False) instead")
    parser.add_argument("--quantize", choices=["dynamic", "qdq", "qoperator"],
                        help="compare on the model quantized by ONNX Runtime's quantizer")
    parser.add_argument("--levels", action="store_true",
                        help="with --quantize, compare every quantized activation too")
    parser.add_argument("names", nargs="+")
    a = parser.parse_args()
    LEVELS = a.levels
    SMELT, OUT, DYNAMO, QUANTIZE = os.path.abspath(a.smelt), a.out, not a.torchscript, a.quantize
    if a.torchscript:
        OUT += "-torchscript"
    for name in (NAMES if a.names == ["all"] else a.names):
        t = time.time()
        try:
            r = run(name)
        except Exception as e:
            r = "script error: " + repr(e)[:300]
        print(f"{name}: {r} ({time.time()-t:.0f} s)", flush=True)
