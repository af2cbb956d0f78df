// libcudnn.so.9 through dlopen and a table of the symbols Smelt calls, like the driver's
// (CudaDriver.h): binaries start without cuDNN, and a missing library or symbol is an error to
// report. cudnn.h is included for types and signatures only.
#pragma once

#include "runtime/Status.h"

#include <cudnn.h>

#include <fmt/format.h>

namespace smelt::rt::cuda {

// symbol in libcudnn, member in the table.
#define SMELT_CUDNN_ENTRIES(X)                                                                     \
  X(cudnnGetVersion, getVersion)                                                                   \
  X(cudnnGetErrorString, getErrorString)                                                           \
  X(cudnnCreate, create)                                                                           \
  X(cudnnSetStream, setStream)                                                                     \
  X(cudnnCreateTensorDescriptor, createTensorDescriptor)                                           \
  X(cudnnSetTensorNdDescriptor, setTensorNdDescriptor)                                             \
  X(cudnnDestroyTensorDescriptor, destroyTensorDescriptor)                                         \
  X(cudnnCreateFilterDescriptor, createFilterDescriptor)                                           \
  X(cudnnSetFilter4dDescriptor, setFilter4dDescriptor)                                             \
  X(cudnnDestroyFilterDescriptor, destroyFilterDescriptor)                                         \
  X(cudnnCreateConvolutionDescriptor, createConvolutionDescriptor)                                 \
  X(cudnnSetConvolution2dDescriptor, setConvolution2dDescriptor)                                   \
  X(cudnnSetConvolutionMathType, setConvolutionMathType)                                           \
  X(cudnnSetConvolutionGroupCount, setConvolutionGroupCount)                                       \
  X(cudnnDestroyConvolutionDescriptor, destroyConvolutionDescriptor)                               \
  X(cudnnCreatePoolingDescriptor, createPoolingDescriptor)                                         \
  X(cudnnSetPooling2dDescriptor, setPooling2dDescriptor)                                           \
  X(cudnnDestroyPoolingDescriptor, destroyPoolingDescriptor)                                       \
  X(cudnnGetConvolutionForwardAlgorithm_v7, forwardAlgorithms)                                     \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, backwardDataAlgorithms)                           \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7, backwardFilterAlgorithms)                       \
  X(cudnnConvolutionForward, convolutionForward)                                                   \
  X(cudnnConvolutionBackwardData, convolutionBackwardData)                                         \
  X(cudnnConvolutionBackwardFilter, convolutionBackwardFilter)                                     \
  X(cudnnPoolingForward, poolingForward)                                                           \
  X(cudnnPoolingBackward, poolingBackward)                                                         \
  X(cudnnTransformTensor, transformTensor)

struct CudnnLibrary {
#define SMELT_CUDNN_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  SMELT_CUDNN_ENTRIES(SMELT_CUDNN_MEMBER)
#undef SMELT_CUDNN_MEMBER
  /// Optional: more detail than the status name where the library has it.
  decltype(&::cudnnGetLastErrorString) getLastErrorString = nullptr;
  size_t version = 0;

  /// Success, or "<call> failed: CUDNN_STATUS_<NAME> (<cudnnGetLastErrorString>)".
  Status check(cudnnStatus_t status, const char *call) const {
    if (status == CUDNN_STATUS_SUCCESS)
      return {};
    const char *name = getErrorString(status);
    char detail[512] = {};
    if (getLastErrorString)
      getLastErrorString(detail, sizeof detail - 1);
    return Status::error(fmt::format("{} failed: {}{}", call,
                                     name ? name : fmt::format("cuDNN status {}", int(status)),
                                     *detail ? fmt::format(" ({})", detail) : std::string()));
  }
};

/// The library, opened once per process: libcudnn.so.9, found as cudaLibraryCandidates
/// (DynamicLibrary.h) says. The error names the library or the symbol that is missing, or a
/// version other than 9.
const Expected<const CudnnLibrary *> &cudnnLibrary();

} // namespace smelt::rt::cuda
