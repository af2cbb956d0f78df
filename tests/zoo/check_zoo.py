"""Runs the mini model zoo (tests/zoo/models, written by generate.py) through Smelt as a user
would, with no flag beyond the files: for each model and exporter,

  JIT  smelt import model.onnx -o m.mlirbc --weights-out w.safetensors
       smelt run m.mlirbc --params w.safetensors --input NAME=input_NAME.npy
  AOT  smelt import model.onnx -o c.mlirbc --initializers-as-constants
       smelt compile c.mlirbc -o c.smelt; smelt run c.smelt --input ...

and compares each run's output with ONNX Runtime's (expected_output.npy): relative L2 error at
most 1e-4. Prints one line per model, sorted; exits 1 if any failed.

With --emulated-gpu EMUCUDA_DIR both runs are on gpu:0 of the emulated CUDA (docs/emucuda.md):
the JIT places the model itself, the artifact is compiled for cuda:sm_90, and a model any of
whose ops the JIT's placement leaves on cpu:0 fails.

    check_zoo.py MODELS_DIR WORK_DIR [--only name.exporter,...] [--emulated-gpu EMUCUDA_DIR]
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4
# The environment of the runs: the emulated driver's folder when --emulated-gpu names one.
RUN_ENV = None
TARGET = "cpu"


def smelt(*args, env=None):
    result = subprocess.run(["smelt", *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise RuntimeError(f"smelt {args[0]}: {message[-1] if message else 'failed'}")
    return result.stdout + result.stderr


def relative_l2(got_path, want):
    got = np.load(got_path).astype(np.float64)
    if got.shape != want.shape:
        raise RuntimeError(f"output shape {list(got.shape)}, ONNX Runtime's {list(want.shape)}")
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def check(models, work, name):
    folder, out = f"{models}/{name}", f"{work}/{name}"
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    inputs = []
    for f in sorted(os.listdir(folder)):
        if f.startswith("input_"):
            inputs += ["--input", f"{f[len('input_'):-len('.npy')]}={folder}/{f}"]
    try:
        want = np.load(f"{folder}/expected_output.npy").astype(np.float64)
        smelt("import", f"{folder}/model.onnx", "-o", f"{out}/m.mlirbc", "--weights-out",
              f"{out}/w.safetensors")
        log = smelt("run", f"{out}/m.mlirbc", "--no-cache", "--params", f"{out}/w.safetensors",
                    *inputs, "--output-dir", f"{out}/jit", env=RUN_ENV)
        if RUN_ENV:
            placement = [line for line in log.splitlines() if line.startswith("placement:")]
            if not placement or "cpu:0" in placement[0] or "gpu:0" not in placement[0]:
                raise RuntimeError(f"not all on gpu:0: {placement[0] if placement else log}")
        jit = relative_l2(f"{out}/jit/output.npy", want)
        smelt("import", f"{folder}/model.onnx", "-o", f"{out}/c.mlirbc",
              "--initializers-as-constants")
        smelt("compile", f"{out}/c.mlirbc", f"--target={TARGET}", "-o", f"{out}/c.smelt")
        smelt("run", f"{out}/c.smelt", *inputs, "--output-dir", f"{out}/aot", env=RUN_ENV)
        aot = relative_l2(f"{out}/aot/output.npy", want)
    except (RuntimeError, OSError) as e:
        return False, f"FAIL {name}: {e}"
    ok = jit <= TOLERANCE and aot <= TOLERANCE
    return ok, f"{'OK' if ok else 'MISMATCH'} {name} jit {jit:.1e} aot {aot:.1e}"


def main():
    global RUN_ENV, TARGET
    models, work = sys.argv[1], sys.argv[2]
    if "--emulated-gpu" in sys.argv:
        emucuda = os.path.abspath(sys.argv[sys.argv.index("--emulated-gpu") + 1])
        RUN_ENV = dict(os.environ, SMELT_CUDA_LIBRARY_PATH=emucuda,
                       SMELT_CUDA_SOURCE_DIR=f"{emucuda}/kernels")
        TARGET = "cuda:sm_90"
    names = sorted(d for d in os.listdir(models) if os.path.isdir(f"{models}/{d}"))
    if "--only" in sys.argv:
        names = sys.argv[sys.argv.index("--only") + 1].split(",")
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda n: check(models, work, n), names))
    for _, line in results:
        print(line)
    passed = sum(ok for ok, _ in results)
    print(f"{passed} of {len(results)} models match ONNX Runtime")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
