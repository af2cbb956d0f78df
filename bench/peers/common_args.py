"""The command line every peer script takes, and the one JSON line it prints: what
bench/peers/run.py reads."""
import argparse
import json

WORKLOADS = ("mlp", "cnn", "resnet", "gpt", "lstm", "chain")
WARMUP, STEPS = 10, 50  # as smelt-bench-train-step: median of 50 steps after 10 of warm-up


def parse(modes):
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("mode", choices=modes)
    p.add_argument("--batch", type=int)
    args = p.parse_args()
    if args.batch is None:
        args.batch = {"gpt": 32, "lstm": 64, "resnet": 64}.get(args.workload, 256)
    return args


def report(args, peer, step_ms, compile_ms=None):
    print(json.dumps({"peer": f"{peer} {args.mode}", "workload": args.workload,
                      "step_ms": step_ms, "compile_ms": compile_ms}), flush=True)
