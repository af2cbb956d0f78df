#!/usr/bin/env python3
"""The full-size model zoo side by side: Smelt, ONNX Runtime and PyTorch eager on the same
models with random weights, exported with PyTorch's default exporter (torch.onnx.export,
dynamo=True, weights as external data) as a user would (T5's encoder, which that exporter
cannot export in PyTorch 2.15, with dynamo=False). For each model and batch size, in
interleaved rounds, each engine runs in a process of its own (so peak RSS is the engine's):

  smelt   smelt run model.onnx --input ... --repeat N --no-cache (latency, compile, peak RSS)
  ort     onnxruntime.InferenceSession (CPU provider, default options), N runs after warm-up
  torch   the module itself under torch.inference_mode(), N runs after warm-up

Peak RSS is each process's VmHWM (getrusage's ru_maxrss would include this script's, which
Linux carries across fork and exec). It prints a Markdown table: median latency per engine
(the median over rounds of each round's median), Smelt/ORT, peak RSS per engine and Smelt's
compile time, and whether Smelt's output matches ONNX Runtime's (relative L2). Runs in bench/peers/setup.sh's venv (with
torchvision, transformers, onnxscript, onnxruntime), not in CI:

  python bench/peers/zoo.py --smelt build/bin/smelt [--models resnet50,vit_b_16] [--batch 1,8]
                            [--runs 20] [--rounds 3] [--threads 2] [--out /tmp/smelt-zoo]
                            [--engines smelt,ort,torch] [--baseline OTHER_SMELT]

--baseline adds an engine, `baseline`: another Smelt binary (say, the previous commit's),
measured as `smelt` is, in the same rounds.

--quantize dynamic|qdq runs each model as ONNX Runtime's quantizer leaves it (quantize_dynamic:
int8 weights, DynamicQuantizeLinear + MatMulInteger; or quantize_static in the QDQ format,
calibrated on 8 inputs near the given one), in OUT/<name>.b<batch>.<kind>/; the torch engine
runs the float module there.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

# tests/zoo/generate.py's Logits wraps the Hugging Face models here and in the pickles that the
# torch engine loads.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "zoo"))

TORCHVISION = {
    "resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2",
    "mobilenet_v3_small": "mobilenet_v3_small", "efficientnet_b0": "efficientnet_b0",
    "densenet121": "densenet121", "shufflenet_v2": "shufflenet_v2_x1_0",
    "regnet_y_400mf": "regnet_y_400mf", "convnext_tiny": "convnext_tiny",
    "vit_b_16": "vit_b_16", "swin_t": "swin_t",
}
HF = ["bert", "distilbert", "roberta", "gpt2", "llama", "t5_encoder", "vit_hf", "whisper_encoder"]
# Sequence models built on torch.nn's recurrent layers (recurrent_models.py), exported as ONNX
# LSTM and GRU nodes.
RECURRENT = ["bilstm_tagger", "gru_encoder"]
SEQ = 128
NOT_DYNAMO = {"t5_encoder"}  # exported with dynamo=False (see export)


def build(name):
    """(module in eval mode, {input name: function of the batch size -> array})."""
    import torch
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in TORCHVISION:
        import torchvision
        model = getattr(torchvision.models, TORCHVISION[name])()
        return model.eval(), {"image": lambda b: rng.standard_normal((b, 3, 224, 224)).astype(np.float32)}
    ids = {"input_ids": lambda b: rng.integers(0, 1000, (b, SEQ)).astype(np.int64)}
    if name in RECURRENT:
        from recurrent_models import Recurrent
        return Recurrent(name).eval(), ids
    import transformers as hf
    from generate import Logits
    if name == "bert":
        return Logits(hf.BertModel(hf.BertConfig())).eval(), ids
    if name == "distilbert":
        return Logits(hf.DistilBertModel(hf.DistilBertConfig())).eval(), ids
    if name == "roberta":
        return Logits(hf.RobertaModel(hf.RobertaConfig(vocab_size=50265))).eval(), ids
    if name == "gpt2":
        return Logits(hf.GPT2LMHeadModel(hf.GPT2Config())).eval(), ids
    if name == "llama":
        # A small Llama (about 60M parameters besides the embeddings) with grouped-query
        # attention, as Llama 2/3 have it: 8 query heads share 2 key/value heads.
        return Logits(hf.LlamaForCausalLM(hf.LlamaConfig(
            hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8,
            num_key_value_heads=2, vocab_size=32000, max_position_embeddings=512))).eval(), ids
    if name == "t5_encoder":  # t5-small's encoder (T5Config's defaults)
        return Logits(hf.T5EncoderModel(hf.T5Config())).eval(), ids
    if name == "vit_hf":
        return Logits(hf.ViTModel(hf.ViTConfig())).eval(), {
            "pixel_values": lambda b: rng.standard_normal((b, 3, 224, 224)).astype(np.float32)}
    if name == "whisper_encoder":
        return Logits(hf.WhisperModel(hf.WhisperConfig.from_dict({})).get_encoder()).eval(), {
            "input_features": lambda b: rng.standard_normal((b, 80, 3000)).astype(np.float32)}
    raise KeyError(name)


def perturbed(model):
    """Parameters an initializer leaves at zero (torchvision ViT's head, every Hugging Face
    bias) get small random values: a zero output would hide a wrong result."""
    import torch
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.02)
    return model


def export(name, batch, out):
    """OUT/<name>.b<batch>/: model.onnx (+ .data), input_*.npy, model.pt (the module)."""
    import torch
    folder = f"{out}/{name}.b{batch}"
    if os.path.exists(f"{folder}/model.onnx"):
        return folder
    os.makedirs(folder, exist_ok=True)
    model, makers = build(name)
    model = perturbed(model)
    inputs = {k: f(batch) for k, f in makers.items()}
    for k, v in inputs.items():
        np.save(f"{folder}/input_{k}.npy", v)
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    # T5's attention reshapes a transposed tensor, which the default exporter's decomposition
    # refuses in PyTorch 2.15 ("Cannot view a tensor with shape [1, 128, 8, 64] and strides
    # ..."): T5 goes through the TorchScript exporter, as the mini zoo's does.
    torch.onnx.export(model, args, f"{folder}/model.onnx", input_names=list(inputs),
                      output_names=["output"], dynamo=name not in NOT_DYNAMO)
    torch.save(model, f"{folder}/model.pt")
    return folder


def quantized(folder, kind):
    """FOLDER.<kind>/: folder's model quantized by ONNX Runtime's quantizer (tests/zoo/
    generate.py's quantize_model), its inputs and module."""
    import shutil
    from generate import quantize_model
    target = f"{folder}.{kind}"
    if os.path.exists(f"{target}/model.onnx"):
        return target
    os.makedirs(target, exist_ok=True)
    for f in os.listdir(folder):
        if f.startswith("input_") or f == "model.pt":
            shutil.copy(f"{folder}/{f}", target)
    inputs = {f[6:-4]: np.load(f"{folder}/{f}") for f in os.listdir(folder) if f.startswith("input_")}
    quantize_model(f"{folder}/model.onnx", f"{target}/model.onnx", kind, inputs,
                   np.random.default_rng(1))
    return target


# Each engine's measurement, run as `python zoo.py --engine E FOLDER RUNS THREADS`: prints one
# JSON line {"ms": median, "rss": peak bytes, "out": path of its output}.
def engine_main(engine, folder, runs, threads):
    import time
    inputs = {f[6:-4]: np.load(f"{folder}/{f}") for f in sorted(os.listdir(folder))
              if f.startswith("input_")}
    times = []
    if engine == "ort":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(f"{folder}/model.onnx", options,
                                       providers=["CPUExecutionProvider"])
        call = lambda: session.run(None, inputs)[0]
    else:
        import torch
        torch.set_num_threads(threads)
        model = torch.load(f"{folder}/model.pt", weights_only=False)
        args = tuple(torch.from_numpy(v) for v in inputs.values())

        def call():
            with torch.inference_mode():
                return model(*args).numpy()
    for _ in range(3):
        result = call()
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    np.save(f"{folder}/{engine}.npy", result)
    print(json.dumps({"ms": statistics.median(times), "rss": peak_resident_bytes()}))


def peak_resident_bytes():
    """VmHWM: this process's own peak (ru_maxrss carries the parent's across exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(engine, folder, runs, threads, smelts):
    """`smelts`: the Smelt binary of each Smelt engine (smelt, and baseline with --baseline)."""
    if engine in smelts:
        inputs = [f"--input={f[6:-4]}={folder}/{f}" for f in sorted(os.listdir(folder))
                  if f.startswith("input_")]
        env = dict(os.environ, SMELT_CPU_THREADS=str(threads))
        text = subprocess.run([smelts[engine], "run", f"{folder}/model.onnx", *inputs,
                               "--no-cache", "--repeat", str(runs),
                               "--output-dir", f"{folder}/{engine}"],
                              capture_output=True, text=True, env=env)
        if text.returncode:
            return {"error": (text.stderr.strip().splitlines() or ["failed"])[-1]}
        out = text.stdout
        return {"ms": float(re.search(r"median ([0-9.]+) ms", out).group(1)),
                "compile": float(re.search(r"compile: ([0-9.]+) s", out).group(1)),
                "rss": float(re.search(r"peak resident memory: ([0-9.]+) MiB", out).group(1)) * 2**20}
    text = subprocess.run([sys.executable, __file__, "--engine", engine, folder, str(runs),
                           str(threads)], capture_output=True, text=True)
    if text.returncode:
        return {"error": (text.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(text.stdout.strip().splitlines()[-1])


def relative_l2(folder):
    try:
        got = np.load(f"{folder}/smelt/output.npy").astype(np.float64)
        want = np.load(f"{folder}/ort.npy").astype(np.float64)
        return np.linalg.norm(got - want) / np.linalg.norm(want)
    except (OSError, ValueError):
        return float("nan")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--engine":
        return engine_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--smelt", default="build/bin/smelt")
    parser.add_argument("--models", default=",".join(list(TORCHVISION) + HF + RECURRENT))
    parser.add_argument("--batch", default="1")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--engines", default="smelt,ort,torch")
    parser.add_argument("--out", default="/tmp/smelt-zoo")
    parser.add_argument("--baseline", help="another smelt binary, measured as engine `baseline`")
    parser.add_argument("--quantize", choices=["dynamic", "qdq"],
                        help="run the models as ONNX Runtime's quantizer leaves them")
    a = parser.parse_args()
    smelts = {"smelt": os.path.abspath(a.smelt)}
    engines = a.engines.split(",")
    if a.baseline:
        smelts["baseline"] = os.path.abspath(a.baseline)
        engines.append("baseline")
    print("| model | batch | " + " | ".join(f"{e} ms" for e in engines) +
          " | Smelt/ORT | " + " | ".join(f"{e} peak RSS MiB" for e in engines) +
          " | Smelt RSS/ORT | Smelt compile s | Smelt vs ORT rel. L2 |")
    print("|" + "---|" * (2 * len(engines) + 6))
    for name in a.models.split(","):
        for batch in [int(b) for b in a.batch.split(",")]:
            folder = export(name, batch, a.out)
            if a.quantize:
                folder = quantized(folder, a.quantize)
            rounds = {e: [] for e in engines}
            for _ in range(a.rounds):
                for e in engines:  # interleaved: each round runs every engine once
                    rounds[e].append(measure(e, folder, a.runs, a.threads, smelts))
            cells, rss, ms = [], [], {}
            for e in engines:
                good = [r for r in rounds[e] if "error" not in r]
                if not good:
                    cells.append(f"failed: {rounds[e][0]['error'][:80]}")
                    rss.append("-")
                    continue
                ms[e] = statistics.median(r["ms"] for r in good)
                cells.append(f"{ms[e]:.1f}")
                rss.append(f"{max(r['rss'] for r in good) / 2**20:.0f}")
            ratio = f"{ms['smelt'] / ms['ort']:.2f}" if "smelt" in ms and "ort" in ms else "-"
            smelt_runs = [r for r in rounds.get("smelt", []) if "error" not in r]
            ort_runs = [r for r in rounds.get("ort", []) if "error" not in r]
            rss_ratio = (f"{max(r['rss'] for r in smelt_runs) / max(r['rss'] for r in ort_runs):.2f}"
                         if smelt_runs and ort_runs else "-")
            compile_s = (f"{statistics.median(r['compile'] for r in smelt_runs):.1f}"
                         if smelt_runs else "-")
            print(f"| {name} | {batch} | " + " | ".join(cells) + f" | {ratio} | " +
                  " | ".join(rss) + f" | {rss_ratio} | {compile_s} | {relative_l2(folder):.1e} |",
                  flush=True)


if __name__ == "__main__":
    main()
