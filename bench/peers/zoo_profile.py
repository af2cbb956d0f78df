#!/usr/bin/env python3
"""Where each zoo model's step time goes in Smelt: `smelt bench model.onnx --json` on the
folders bench/peers/zoo.py exported, each step's median put in one class, and a Markdown table
of the classes' shares of the summed step medians, with the largest single step:

  conv2d        the oneDNN convolutions (forward, with their folded bias and activation)
  matmul        the oneDNN matmuls
  library       the other library calls (pooling, slice, concat, pad, argmax ...)
  transposing   fused kernels that move data between layouts (a transpose among their ops)
  reducing      fused kernels with a reduction (softmax, normalization, pooling by reduce)
  elementwise   the other fused kernels (activations, residual adds, what no library folded)

Not in CI; it reads the exports zoo.py left (run zoo.py first, or give --out its folder):

  python bench/peers/zoo_profile.py --smelt build/bin/smelt [--models resnet50,bert]
                                    [--batch 1] [--repeat 10] [--threads 2] [--out /tmp/smelt-zoo]
"""
import argparse
import json
import os
import subprocess

CLASSES = ["conv2d", "matmul", "library", "transposing", "reducing", "elementwise"]


def step_class(step):
    if step["kind"] != "kernel":
        name = step["name"]
        return name if name in ("conv2d", "matmul") else "library"
    ops = step["ops"].split("+")
    if "transpose" in ops:
        return "transposing"
    if "reduce" in ops:
        return "reducing"
    return "elementwise"


def profile(smelt, folder, repeat, threads):
    # smelt bench draws random inputs of the model's shapes (out-of-range token ids clamp,
    # as gather's do), which is all a profile needs.
    env = dict(os.environ, SMELT_CPU_THREADS=str(threads))
    run = subprocess.run([smelt, "bench", f"{folder}/model.onnx", "--json", "--no-cache",
                          "--repeat", str(repeat)], capture_output=True, text=True, env=env)
    if run.returncode:
        return None, (run.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(run.stdout), ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smelt", default="build/bin/smelt")
    parser.add_argument("--models", default="")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default="/tmp/smelt-zoo")
    a = parser.parse_args()
    smelt = os.path.abspath(a.smelt)
    models = a.models.split(",") if a.models else sorted(
        f[:-len(f".b{a.batch}")] for f in os.listdir(a.out) if f.endswith(f".b{a.batch}"))
    print("| model | steps | wall ms | " + " | ".join(f"{c} %" for c in CLASSES) +
          " | largest step |")
    print("|" + "---|" * (len(CLASSES) + 4))
    for name in models:
        folder = f"{a.out}/{name}.b{a.batch}"
        result, error = profile(smelt, folder, a.repeat, a.threads)
        if not result:
            print(f"| {name} | failed: {error[:80]} |")
            continue
        steps = result["steps"]
        total = sum(s["median_us"] for s in steps) or 1.0
        share = {c: 0.0 for c in CLASSES}
        for s in steps:
            share[step_class(s)] += s["median_us"] / total * 100
        top = max(steps, key=lambda s: s["median_us"])
        top_text = (f"{top['name']} ({top['ops']}) {top['median_us'] / total * 100:.0f}%"
                    if top["kind"] == "kernel" else
                    f"{top['name']} {top['shapes']} {top['median_us'] / total * 100:.0f}%")
        print(f"| {name} | {len(steps)} | {result['wall_median_us'] / 1e3:.1f} | " +
              " | ".join(f"{share[c]:.0f}" for c in CLASSES) + f" | {top_text} |")


if __name__ == "__main__":
    main()
