#!/usr/bin/env python3
"""How fast `smelt run` gets a model with large weights running, and with how much memory: the
ONNX file through the JIT cache cold (an empty cache folder: compile, then write the entry) and
warm (an entry on disk: map and check it instead of compiling), and with --no-cache (compile);
an AOT artifact (`smelt compile`, then `smelt run model.smelt`); the module `smelt import` wrote
as bytecode with the weights as constants, and as text with the weights in a safetensors file
(`--params`), both with --no-cache; and `smelt import --weights-out` writing that module and
file; for this build and a baseline build, in the same run.

The model is an MLP of LAYERS square MatMul+Relu layers of WIDTH (f32 weights in external
data: 16 x 2048 is 256 MiB), batch 8, written with the `onnx` package (bench/peers/setup.sh's
venv has it). Each build compiles the artifact from the same `smelt import`ed module. Each round
runs every build and mode once, interleaved; the table gives each one's median wall time and
peak RSS over ROUNDS rounds, and each mode's ratio to the baseline.

  python3 bench/weights_load.py --baseline OTHER/build/bin [--smelt build/bin]
                                [--layers 16] [--width 2048] [--rounds 5]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from onnx_paths import timed  # this script's folder is on the path

MODES = ["cold", "warm", "no-cache", "aot", "bytecode", "params", "import-params"]


def write_model(path, layers, width):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) * 0.02).astype(np.float32)
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"])]
        x = f"r{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, width])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path, save_as_external_data=True,
              location=os.path.basename(path) + ".data")
    np.save(path + ".x.npy", rng.standard_normal((8, width)).astype(np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smelt", default="build/bin")
    parser.add_argument("--baseline", required=True, help="the other build's bin folder")
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write-model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_model:
        return write_model(args.write_model, args.layers, args.width)
    work = tempfile.mkdtemp(prefix="smelt-weights-load-")
    model = f"{work}/mlp.onnx"
    subprocess.run([sys.executable, __file__, "--baseline", "", "--write-model", model,
                    "--layers", str(args.layers), "--width", str(args.width)], check=True)
    builds = {"this": args.smelt, "baseline": args.baseline}
    results = {(b, m): [] for b in builds for m in MODES}
    subprocess.run([f"{args.smelt}/smelt", "import", model, "-o", f"{work}/mlp.mlirbc",
                    "--initializers-as-constants"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([f"{args.smelt}/smelt", "import", model, "-o", f"{work}/mlp.mlir",
                    "--weights-out", f"{work}/mlp.safetensors"], check=True,
                   stdout=subprocess.DEVNULL)
    for build, tools in builds.items():
        subprocess.run([f"{tools}/smelt", "compile", f"{work}/mlp.mlirbc", "--no-cache", "-o",
                        f"{work}/{build}.smelt"], check=True, stdout=subprocess.DEVNULL)
    for _ in range(args.rounds):
        for build, tools in builds.items():
            cache = f"{work}/cache-{build}"
            env = dict(os.environ, SMELT_CACHE_DIR=cache)
            run = [f"{tools}/smelt", "run", model, "--input", f"x={model}.x.npy",
                   "--output-dir", f"{work}/out-{build}"]
            shutil.rmtree(cache, ignore_errors=True)
            results[build, "cold"].append(timed(run, env))
            results[build, "warm"].append(timed(run, env))
            results[build, "no-cache"].append(timed(run + ["--no-cache"], env))
            inputs = ["--input", f"x={model}.x.npy", "--output-dir", f"{work}/out-{build}"]
            results[build, "aot"].append(timed(
                [f"{tools}/smelt", "run", f"{work}/{build}.smelt", *inputs], env))
            results[build, "bytecode"].append(timed(
                [f"{tools}/smelt", "run", f"{work}/mlp.mlirbc", "--no-cache", *inputs], env))
            results[build, "import-params"].append(timed(
                [f"{tools}/smelt", "import", model, "-o", f"{work}/{build}.mlir",
                 "--weights-out", f"{work}/{build}.safetensors"], env))
            results[build, "params"].append(timed(
                [f"{tools}/smelt", "run", f"{work}/mlp.mlir", "--params",
                 f"{work}/mlp.safetensors", "--no-cache", *inputs], env))
    shutil.rmtree(work, ignore_errors=True)
    mib = args.layers * args.width * args.width * 4 / 2**20
    print(f"MLP {args.layers} x {args.width}, {mib:.0f} MiB of weights, "
          f"median of {args.rounds} rounds")
    print("| mode | wall s | baseline wall s | ratio | peak RSS MiB | baseline peak RSS MiB |"
          " ratio |")
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        wall = {b: statistics.median(w for w, _ in results[b, mode]) for b in builds}
        rss = {b: statistics.median(r for _, r in results[b, mode]) for b in builds}
        print(f"| {mode} | {wall['this']:.3f} | {wall['baseline']:.3f} | "
              f"{wall['this'] / wall['baseline']:.2f} | {rss['this']:.0f} | "
              f"{rss['baseline']:.0f} | {rss['this'] / rss['baseline']:.2f} |")


if __name__ == "__main__":
    main()
