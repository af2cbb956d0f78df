# lit configuration for Smelt's .mlir tests: smelt-opt, smelt and FileCheck on the PATH.
import ctypes
import os
import shutil
import lit.formats

config.name = "Smelt"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.smelt_obj_root, "tests")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "unit", "inputs"]
config.environment["PATH"] = os.pathsep.join(
    [config.smelt_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%smelt_build", config.smelt_obj_root))
# Tests that act as another user (a cache folder someone else owns) need root.
if os.geteuid() == 0:
    config.available_features.add("root")
# The smelt tools compile through the on-disk JIT cache by default. The tests keep theirs in the
# build tree, emptied when lit starts (so a run does not depend on the one before), never in the
# user's ~/.cache; tests of the cache itself give each command a directory of its own.
jit_cache = os.path.join(config.test_exec_root, "jit-cache")
shutil.rmtree(jit_cache, ignore_errors=True)
config.environment["SMELT_CACHE_DIR"] = jit_cache
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "inputs")))
# Tests of files only the CUDA back end writes (CUDA source, PTX in dumps) need it built.
if config.smelt_cuda_codegen:
    config.available_features.add("cuda-codegen")
# A CUDA driver that finds a GPU (the GPU machine): tests whose output differs with one use
# `%if gpu %{ ... %}`.
def has_gpu():
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
if has_gpu():
    config.available_features.add("gpu")
# The emulated CUDA (tests/emucuda, docs/emucuda.md) that tests/emucuda builds: tests that run
# the GPU path on it name its folder, %emucuda, in SMELT_CUDA_LIBRARY_PATH.
emucuda = os.path.join(config.smelt_obj_root, "emucuda")
if os.path.isfile(os.path.join(emucuda, "libcuda.so.1")):
    config.available_features.add("emulated-gpu")
    config.substitutions.append(("%emucuda", emucuda))
# Data-parallel tests start two ranks on this machine with mpirun (OpenMPI): as root in a
# container too, and more ranks than cores on a small CI machine.
if config.smelt_mpiexec:
    config.available_features.add("mpi")
    mpi_environment = ["OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                       "OMPI_MCA_rmaps_base_oversubscribe=1",
                       "OMPI_MCA_btl_vader_single_copy_mechanism=none"]
    config.substitutions.append(
        ("%mpirun", "env " + " ".join(mpi_environment) + " " + config.smelt_mpiexec + " -n"))
# ONNX's node tests (libonnx-testdata) and python3-onnx to read their .pb files: the import
# tests that run a model need both, and are UNSUPPORTED (skipped) without them.
onnx_node_tests = "/usr/share/libonnx-testdata/data/node"
config.substitutions.append(("%onnx_node_tests", onnx_node_tests))
def has_python_onnx():
    import subprocess
    return subprocess.call([config.python_executable, "-c", "import onnx, numpy"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
if os.path.isdir(onnx_node_tests) and has_python_onnx():
    config.available_features.add("onnx-testdata")
# Real English text for the GPT (Debian's fortunes-min, which scripts/setup.sh installs).
if os.path.isfile("/usr/share/games/fortunes/fortunes"):
    config.available_features.add("fortunes")
