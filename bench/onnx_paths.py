#!/usr/bin/env python3
"""The three ways an ONNX model's weights reach `smelt run`, side by side on the models of
bench/onnx_zoo.py: parameters (`smelt import --weights-out`, `run --params`), constants in
MLIR bytecode (`-o model.mlirbc --initializers-as-constants`) and constants in MLIR text.

For each model and way: `smelt import` and `smelt run --no-cache` (process start, parse,
compile, one inference) wall time and peak RSS, median of ROUNDS rounds interleaved across the
ways; the steady-state inference time (`smelt bench`'s median of whole runs); and how many
transposes, reshapes and converts of constants the compiled module still runs (after the
pipeline's canonicalization, counted by tests/tools/onnx_constant_layouts.py check-ir).

  python3 bench/onnx_paths.py [--models bert,gpt2,resnet50] [--rounds 3] [--smelt build/bin]
                              [--work /tmp/smelt-onnx-paths]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = {"resnet50": "input", "gpt2": "input_ids", "bert": "input_ids"}
WAYS = ["params", "bytecode", "text"]


def timed(command, env=None):
    """Wall seconds and peak RSS (MiB) of `command`, which must succeed. (A child's peak counts
    what it shared with the calling process before exec: keep that process small.)"""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode()
    process.stderr.close()
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{stderr}")
    return wall, usage.ru_maxrss / 1024


def commands(tools, work, model):
    base, data = f"{work}/{model}", f"{work}/{model}.input.npy"
    module = {"params": f"{base}.p.mlir", "bytecode": f"{base}.c.mlirbc", "text": f"{base}.c.mlir"}
    imports = {
        "params": [f"{tools}/smelt", "import", f"{base}.onnx", "-o", module["params"],
                   "--weights-out", f"{base}.safetensors"],
        "bytecode": [f"{tools}/smelt", "import", f"{base}.onnx", "-o", module["bytecode"],
                     "--initializers-as-constants"],
        "text": [f"{tools}/smelt", "import", f"{base}.onnx", "-o", module["text"],
                 "--initializers-as-constants"],
    }
    params = {"params": ["--params", f"{base}.safetensors"]}
    runs = {way: [f"{tools}/smelt", "run", module[way], "--no-cache", "--input",
                  f"{INPUTS[model]}={data}", *params.get(way, [])] for way in WAYS}
    return module, imports, runs


def steady_state(tools, module):
    """`smelt bench`'s median of whole runs (its own random inputs and parameters), in ms."""
    out = subprocess.run([f"{tools}/smelt", "bench", module, "--repeat", "5", "--no-cache"],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^\s+wall\s+([0-9.]+)", out, re.M).group(1)) / 1000  # us


def layout_changes(tools, module, work):
    canonical = f"{work}/canonical.mlir"
    subprocess.run([f"{tools}/smelt-opt", module, "-canonicalize", "-o", canonical], check=True)
    out = subprocess.run([sys.executable, f"{HERE}/../tests/tools/onnx_constant_layouts.py",
                          "check-ir", canonical], capture_output=True, text=True).stdout
    os.remove(canonical)
    return int(re.search(r"(\d+) layout changes", out).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="bert,gpt2,resnet50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smelt", default=f"{HERE}/../build/bin")
    parser.add_argument("--work", default="/tmp/smelt-onnx-paths")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print("| model | way | import s | import MiB | run s | run MiB | steady ms | layout changes "
          "of constants |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        if not os.path.exists(f"{args.work}/{model}.onnx"):
            subprocess.run([sys.executable, f"{HERE}/onnx_zoo.py", args.work, "--models", model],
                           check=True, stdout=subprocess.DEVNULL)
        module, imports, runs = commands(args.smelt, args.work, model)
        samples = {(way, stage): [] for way in WAYS for stage in ("import", "run")}
        for _ in range(args.rounds):  # interleaved: each round runs every way once
            for way in WAYS:
                samples[(way, "import")].append(timed(imports[way]))
                samples[(way, "run")].append(timed(runs[way]))
        for way in WAYS:
            medians = [statistics.median(s[k] for s in samples[(way, stage)])
                       for stage in ("import", "run") for k in (0, 1)]
            steady = steady_state(args.smelt, module[way])
            changes = layout_changes(args.smelt, module[way], args.work)
            print(f"| {model} | {way} | {medians[0]:.2f} | {medians[1]:.0f} | {medians[2]:.2f} | "
                  f"{medians[3]:.0f} | {steady:.1f} | {changes} |", flush=True)
        for path in module.values():
            os.remove(path)


if __name__ == "__main__":
    main()
