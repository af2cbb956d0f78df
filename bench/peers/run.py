"""Smelt beside its peers on this machine (issue 22): the MLP and CNN train steps (batch 256,
f32, Adam), the ResNet with batch norm's (batch 64), the char-level GPT's (batch 32: bench/GptWorkload.h, bench/peers/text.py), the 6-op
chain over 16M floats with the best copy as its floor, and cold compile
times, each in a process of its own, interleaved over several rounds in a rotating order.
Prints the median of each cell and Smelt/peer ratios (below 1: Smelt is faster).

A run counts only when other processes (niced ones aside) took at most 10% of the cores while
it ran (from /proc/stat less the run's own CPU time); a busier run is repeated, up to three
times, and kept marked when none was quiet.
  bench/peers/run.py [--build build] [--venv DIR] [--rounds 3] [--workloads mlp,cnn,resnet,gpt,lstm,chain]
`--threads N` runs every engine on N threads (SMELT_CPU_THREADS and OMP_NUM_THREADS for Smelt and
PyTorch, and for JAX at 1 XLA's single-threaded Eigen); by default each uses all the cores.
The venv is bench/peers/setup.sh's (PyTorch and JAX from PyPI)."""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def busy_seconds():
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    # Less idle and iowait, and niced time: a niced process (a background build or fuzzer)
    # yields its CPU to the runs measured here.
    return (sum(fields[:8]) - fields[1] - fields[3] - fields[4]) / TICK


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_quietly(cmd, env):
    """Runs cmd up to three times until other processes took <= 10% of the cores; returns its
    stdout and the share the others took."""
    for _attempt in range(3):
        busy0, own0, wall0 = busy_seconds(), children_cpu(), time.monotonic()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        busy, own, wall = busy_seconds() - busy0, children_cpu() - own0, time.monotonic() - wall0
        if out.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}")
        others = max(0.0, busy - own) / (wall * os.cpu_count())
        if others <= 0.10:
            break
    return out.stdout, others


def smelt_train(build, model):
    def parse(out):
        got = {}
        for variant in ("fused", "unfused"):
            m = re.search(rf", {variant}: .*?median ([0-9.]+) ms", out)
            got[f"smelt {variant}"] = {"step_ms": float(m.group(1))}
        return got
    batch = {"gpt": "32", "lstm": "64", "resnet": "64"}.get(model, "256")
    return [f"{build}/bin/smelt-bench-train-step", model, batch, "f32", "fused,unfused"], parse


def smelt_chain(build):
    def parse(out):
        medians = {re.sub(r"/repeats:\d+", "", b["run_name"]): b["real_time"]
                   for b in json.loads(out)["benchmarks"]
                   if b.get("aggregate_name") == "median"}
        return {"smelt fused": {"step_ms": medians["chain/fused/manual_time"]},
                "smelt unfused": {"step_ms": medians["chain/unfused/manual_time"]},
                "memcpy": {"step_ms": medians["memcpyFloor/one_thread/manual_time"]},
                "split memcpy": {"step_ms": medians["memcpyFloor/split/manual_time"]}}
    return [f"{build}/bin/smelt-bench-fusion-chain", "--benchmark_format=json"], parse


def smelt_compile(build, model):
    def parse(out):
        cold = re.search(r"cold .*?([0-9.]+) ms", out).group(1)
        disk = re.search(r"on disk .*?([0-9.]+) ms", out).group(1)
        return {"smelt fused": {"compile_ms": float(cold), "warm_ms": float(disk)}}
    return [f"{build}/bin/smelt-bench-compile-cache", "1", model], parse


def peer(venv, script, workload, mode):
    def parse(out):
        line = json.loads(out.strip().splitlines()[-1])
        return {line["peer"]: {k: line[k] for k in ("step_ms", "compile_ms")
                               if line[k] is not None}}
    return [f"{venv}/bin/python", os.path.join(HERE, script), workload, mode], parse


def jobs(args):
    for w in args.workloads:
        if w == "chain":
            yield w, smelt_chain(args.build)
        else:
            yield w, smelt_train(args.build, w)
            yield w, smelt_compile(args.build, w)
        for script, mode in (("torch_peer.py", "eager"), ("torch_peer.py", "compile"),
                             ("jax_peer.py", "jit")):
            yield w, peer(args.venv, script, w, mode)


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--venv", default=os.environ.get("SMELT_PEERS_VENV",
                                                     os.path.expanduser("~/.cache/smelt/peers-venv")))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workloads", default="mlp,cnn,gpt,chain")
    p.add_argument("--threads", type=int, help="threads for every engine (default: all cores)")
    args = p.parse_args()
    args.workloads = args.workloads.split(",")
    env = dict(os.environ, PYTHONPATH=HERE)
    if args.threads:
        env.update(SMELT_CPU_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
                   MKL_NUM_THREADS=str(args.threads))
        if args.threads == 1:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                                " intra_op_parallelism_threads=1").strip()
    todo = list(jobs(args))
    cells, noisy = {}, 0  # (workload, who, metric) -> values
    for r in range(args.rounds):
        shift = r * len(todo) // max(1, args.rounds)
        for workload, (cmd, parse) in todo[shift:] + todo[:shift]:
            out, others = run_quietly(cmd, env)
            noisy += others > 0.10
            for who, metrics in parse(out).items():
                for metric, value in metrics.items():
                    cells.setdefault((workload, who, metric), []).append(value)
            print(f"round {r + 1}: {' '.join(os.path.basename(c) for c in cmd[-3:])}: "
                  f"others {others:.0%}", file=sys.stderr, flush=True)

    def cell(workload, who, metric):
        values = cells.get((workload, who, metric))
        return median(values) if values else None

    threads = f"{args.threads} thread(s)" if args.threads else "all cores"
    print(f"# {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores ({threads}), medians of {args.rounds} "
          f"rounds ({noisy} runs with other processes over 10% of the cores)")
    peers = ("torch eager", "torch compile", "jax jit")
    print("\n| step (ms) | smelt fused | smelt unfused | " + " | ".join(peers) +
          " | smelt / best peer |\n|---|---|---|---|---|---|---|")
    for w in args.workloads:
        mine = cell(w, "smelt fused", "step_ms")
        theirs = {q: cell(w, q, "step_ms") for q in peers}
        best = min(v for v in theirs.values() if v is not None)
        row = [mine, cell(w, "smelt unfused", "step_ms")] + [theirs[q] for q in peers]
        print(f"| {w} | " + " | ".join(f"{v:.2f}" if v is not None else "" for v in row) +
              f" | {mine / best:.2f}x |")
    if "chain" in args.workloads:
        print(f"\nThe chain's floor, a copy of its bytes: one memcpy "
              f"{cell('chain', 'memcpy', 'step_ms'):.2f} ms, split over the kernels' threads "
              f"{cell('chain', 'split memcpy', 'step_ms'):.2f} ms.")
    print("\n| compile (ms) | smelt cold | smelt warm (disk) | torch.compile (first step "
          "beyond a step) | jax lower+compile | smelt cold / jax |\n|---|---|---|---|---|---|")
    for w in (w for w in args.workloads if w != "chain"):
        cold, jax = cell(w, "smelt fused", "compile_ms"), cell(w, "jax jit", "compile_ms")
        print(f"| {w} | {cold:.0f} | {cell(w, 'smelt fused', 'warm_ms'):.1f} | "
              f"{cell(w, 'torch compile', 'compile_ms'):.0f} | {jax:.0f} | {cold / jax:.2f}x |")


if __name__ == "__main__":
    main()
