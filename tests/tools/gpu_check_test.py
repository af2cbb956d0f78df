#!/usr/bin/env python3
"""scripts/gpu-check.sh without a GPU: the real binaries, where every GPU test skips, and
stand-ins that fail, hang, are missing or print benchmark figures, which it must get through.

Usage: gpu_check_test.py REPO BIN_DIR WORK_DIR. Exit 77 (skipped) beside a GPU, where the real
run would use it: scripts/gpu-check.sh itself is the check there.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

TESTS = ["cuda-codegen-tests", "cuda-runtime-tests", "nccl-gpu-tests"]
BENCHMARKS = ["smelt-bench-gemm", "smelt-bench-gpu-bandwidth", "smelt-bench-gpu-train"]
# One test of each binary that needs no GPU or skips without one: seconds, not minutes.
FILTER = ("CudaCompile.VectorSourceBecomes16ByteLoadsAndStores:CublasLt.OddSizes:"
          "NcclGpu.OneRankSumAndMeanOnOneGpu")


def run_check(repo, out, bin_dir, *extra):
    env = dict(os.environ)
    env.pop("OUT", None)
    start = time.monotonic()
    result = subprocess.run([str(repo / "scripts/gpu-check.sh"), "--out", str(out), "--bin",
                             str(bin_dir), *extra], env=env, capture_output=True, text=True,
                            timeout=300)
    seconds = time.monotonic() - start
    if not (out / "summary.json").exists():
        fail(f"no summary.json (exit {result.returncode})", result)
    summary = json.loads((out / "summary.json").read_text())
    return result, summary, seconds


def fail(message, result=None):
    print(f"FAIL: {message}")
    if result is not None:
        print(result.stdout[-6000:], result.stderr[-2000:])
    sys.exit(1)


def by_name(summary):
    return {entry["name"]: entry for entry in summary["results"]}


def check_real_binaries(repo, bin_dir, work):
    """Every GPU test skips here, the benchmarks exit 77: the run passes, quickly."""
    result, summary, seconds = run_check(repo, work / "real", bin_dir, "--filter", FILTER)
    if result.returncode != 0:
        fail(f"gpu-check.sh exited {result.returncode} without a GPU", result)
    if seconds > 60:
        fail(f"took {seconds:.0f} s, more than the 60 s allowed without a GPU", result)
    results = by_name(summary)
    if sorted(results) != sorted(TESTS + BENCHMARKS):
        fail(f"the summary names {sorted(results)}", result)
    for name in TESTS:
        entry = results[name]
        if entry["status"] not in ("passed", "skipped") or len(entry["tests"]) != 1:
            fail(f"{name}: {entry}", result)
    for name in BENCHMARKS:
        if results[name]["status"] != "skipped" or not results[name]["lines"]:
            fail(f"{name}: {results[name]}", result)
    if summary["gpu"] or summary["status"] != "passed":
        fail(f"gpu {summary['gpu']}, status {summary['status']}", result)
    if not summary["libraries"]["NVRTC"] or not summary["smelt_devices"][0].startswith("cpu:0"):
        fail(f"smelt devices was not read: {summary['libraries']}", result)
    if not result.stdout.rstrip().splitlines()[-1].startswith("summary: "):
        fail("the table is not printed last", result)
    if sorted(f.name for f in (work / "real").iterdir()) != ["gpu-check.tar.gz", "summary.json"]:
        fail(f"--out holds {sorted(f.name for f in (work / 'real').iterdir())}", result)
    with tarfile.open(work / "real" / "gpu-check.tar.gz") as archive:
        log = archive.extractfile("gpu-check/gpu-check.log").read().decode()
    if not log.strip() or "summary: " not in log:
        fail("no whole log in the archive", result)
    print(f"real binaries: passed in {seconds:.1f} s")


def write_script(path, body):
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def check_stand_ins(repo, bin_dir, work):
    """A failing binary, a hanging one and a missing one: every step still runs."""
    fake = work / "fake-bin"
    shutil.rmtree(fake, ignore_errors=True)
    fake.mkdir(parents=True)
    shutil.copy(bin_dir / "smelt", fake / "smelt")
    report = {"testsuites": [{"name": "Fake", "testsuite": [
        {"name": "Passes", "status": "RUN", "result": "COMPLETED", "time": "0.5s"},
        {"name": "Fails", "status": "RUN", "result": "COMPLETED", "time": "0.25s",
         "failures": [{"failure": "x.cpp:1\nExpected equality", "type": ""}]}]}]}
    # The report goes where --gtest_output=json:FILE says, as gtest writes it.
    write_script(fake / "cuda-codegen-tests", f"""for a; do [[ $a == --gtest_output=json:* ]] && printf '%s' '{json.dumps(report)}' >"${{a#--gtest_output=json:}}"; done
echo '[  FAILED  ] Fake.Fails'
exit 1
""")
    write_script(fake / "cuda-runtime-tests", "sleep 60\n")
    write_script(fake / "smelt-bench-gemm", """cat <<'TABLE'
NVIDIA H100 80GB HBM3 (sm_90), cuBLASLt 13.1.0, median of 20 samples
mode       N         ms   TFLOP/s  of peak
bf16    4096      0.220    624.7      63%
TABLE
""")
    write_script(fake / "smelt-bench-gpu-bandwidth", "echo 'skipped: needs a GPU: none'\nexit 77\n")
    write_script(fake / "smelt-bench-gpu-train", """echo 'mlp 784-512-256-10 train step, batch 256 (Adam): cpu:0 5.10 ms, gpu:0 0.80 ms: the GPU is 6.4x the CPU'"'"'s speed'
""")
    result, summary, seconds = run_check(repo, work / "fake", fake, "--step-timeout", "3")
    if result.returncode != 1:
        fail(f"gpu-check.sh exited {result.returncode} after failures", result)
    results = by_name(summary)
    if sorted(results) != sorted(TESTS + BENCHMARKS):
        fail(f"the summary names {sorted(results)}", result)
    codegen = results["cuda-codegen-tests"]
    statuses = {t["name"]: t["status"] for t in codegen["tests"]}
    if codegen["status"] != "failed" or statuses != {"Fake.Passes": "passed",
                                                      "Fake.Fails": "failed"}:
        fail(f"cuda-codegen-tests: {codegen}", result)
    hung = results["cuda-runtime-tests"]
    if hung["status"] != "failed" or hung.get("why") != "timed out" or seconds > 40:
        fail(f"the hanging binary: {results['cuda-runtime-tests']}, {seconds:.0f} s", result)
    if results["nccl-gpu-tests"]["status"] != "not run":
        fail(f"the missing binary: {results['nccl-gpu-tests']}", result)
    gemm = {(f["name"], f["unit"]): f["value"] for f in results["smelt-bench-gemm"]["figures"]}
    if gemm.get(("mode=bf16 N=4096 TFLOP/s", "TFLOP/s")) != 624.7 or \
            gemm.get(("mode=bf16 N=4096 of peak", "%")) != 63:
        fail(f"smelt-bench-gemm's figures: {gemm}", result)
    train = {f["name"]: (f["value"], f["unit"]) for f in
             results["smelt-bench-gpu-train"]["figures"]}
    prefix = "mlp 784-512-256-10 train step, batch 256 (Adam)"
    if train.get(f"{prefix}: gpu:0") != (0.8, "ms") or train.get(f"{prefix}: cpu:0") != (5.1, "ms"):
        fail(f"smelt-bench-gpu-train's figures: {train}", result)
    if results["smelt-bench-gpu-bandwidth"]["status"] != "skipped":
        fail(f"exit 77 without a GPU: {results['smelt-bench-gpu-bandwidth']}", result)
    print(f"stand-ins: every step ran, failures reported, in {seconds:.1f} s")


def main():
    repo, bin_dir, work = (Path(p).resolve() for p in sys.argv[1:4])
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"],
                                                     capture_output=True).returncode == 0:
        print("a GPU is here: run scripts/gpu-check.sh itself")
        return 77
    work.mkdir(parents=True, exist_ok=True)
    check_real_binaries(repo, bin_dir, work)
    check_stand_ins(repo, bin_dir, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
