// A rank of the emulated NCCL in a process of its own, for NcclTest's cross-process cases (the
// test process forks and execs it, so that it starts its own emulation from nothing):
//
//   emucuda-nccl-peer ID NRANKS RANK MODE
//
// joins the communicator of unique id ID (its bytes in hex) as RANK, on gpu:0 of its own
// emulated driver, then by MODE:
//   agree     all-reduces NcclPeer.h's f32 inputs (sum, in place) and all-gathers its i32 ones,
//             and checks both results against what every rank can compute; exit 0 when right
//   disagree  all-reduces half as many elements as its peers: exit 0 when that fails naming
//             both counts
//   exit      exits at once with status 3, issuing nothing (a peer that died)
//   idle      issues nothing and sleeps a minute (a peer that is stuck)
#include "EmuCuda.h"
#include "NcclPeer.h"

#include <cuda.h>
#include <nccl.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace emu = smelt::emucuda;
namespace peer = smelt::emucuda::nccl_peer;

namespace {

int failed(const std::string &why) {
  std::fprintf(stderr, "emucuda-nccl-peer (pid %d): %s\n", int(getpid()), why.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  ncclUniqueId id;
  if (argc != 5 || !peer::idFromHex(argv[1], id))
    return failed("usage: emucuda-nccl-peer ID NRANKS RANK agree|disagree|exit|idle");
  int nranks = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  std::string mode = argv[4];
  CUdevice device;
  CUcontext context;
  CUstream stream;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS ||
      cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
    return failed("the emulated driver did not start");
  ncclComm_t comm = nullptr;
  if (ncclResult_t result = ncclCommInitRank(&comm, nranks, id, rank); result != ncclSuccess)
    return failed(std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
  if (mode == "exit")
    _exit(3);
  if (mode == "idle") {
    sleep(60);
    return 0;
  }

  size_t count = mode == "disagree" ? peer::kAllReduceCount / 2 : peer::kAllReduceCount;
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = peer::allReduceInput(rank, i);
  CUdeviceptr buffer;
  if (cuMemAlloc(&buffer, count * 4) != CUDA_SUCCESS ||
      cuMemcpyHtoD(buffer, values.data(), count * 4) != CUDA_SUCCESS ||
      cuCtxSynchronize() != CUDA_SUCCESS)
    return failed("uploading the inputs failed");
  void *data = reinterpret_cast<void *>(uintptr_t(buffer));
  if (ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess)
    return failed(std::string("ncclAllReduce: ") + ncclGetLastError(nullptr));
  CUresult synced = cuStreamSynchronize(stream);
  if (mode == "disagree") {
    std::string fault = emu::lastFault();
    if (synced == CUDA_SUCCESS || fault.find("x1300000") == std::string::npos ||
        fault.find("x650000") == std::string::npos)
      return failed("the disagreeing all-reduce did not fail naming both counts: " + fault);
    ncclCommAbort(comm);
    return 0;
  }
  if (synced != CUDA_SUCCESS || cuMemcpyDtoH(values.data(), buffer, count * 4) != CUDA_SUCCESS)
    return failed("the all-reduce failed: " + emu::lastFault());
  for (size_t i = 0; i < count; ++i) {
    float expected = peer::allReduceInput(0, i); // in rank order, in f32
    for (int r = 1; r < nranks; ++r)
      expected += peer::allReduceInput(r, i);
    if (values[i] != expected)
      return failed("all-reduce element " + std::to_string(i) + " is " +
                    std::to_string(values[i]) + ", not " + std::to_string(expected));
  }

  size_t gathered = peer::kAllGatherCount;
  std::vector<int32_t> mine(gathered), everyone(gathered * size_t(nranks));
  for (size_t i = 0; i < gathered; ++i)
    mine[i] = peer::allGatherInput(rank, i);
  CUdeviceptr send, recv;
  if (cuMemAlloc(&send, gathered * 4) != CUDA_SUCCESS ||
      cuMemAlloc(&recv, everyone.size() * 4) != CUDA_SUCCESS ||
      cuMemcpyHtoD(send, mine.data(), gathered * 4) != CUDA_SUCCESS ||
      cuCtxSynchronize() != CUDA_SUCCESS ||
      ncclAllGather(reinterpret_cast<void *>(uintptr_t(send)),
                    reinterpret_cast<void *>(uintptr_t(recv)), gathered, ncclInt32, comm,
                    stream) != ncclSuccess ||
      cuStreamSynchronize(stream) != CUDA_SUCCESS ||
      cuMemcpyDtoH(everyone.data(), recv, everyone.size() * 4) != CUDA_SUCCESS)
    return failed("the all-gather failed: " + emu::lastFault() + " " + ncclGetLastError(nullptr));
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < gathered; ++i)
      if (everyone[size_t(r) * gathered + i] != peer::allGatherInput(r, i))
        return failed("all-gather element " + std::to_string(i) + " of rank " +
                      std::to_string(r) + " is wrong");
  if (ncclCommDestroy(comm) != ncclSuccess)
    return failed(std::string("ncclCommDestroy: ") + ncclGetLastError(nullptr));
  return 0;
}
