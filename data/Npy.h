// NumPy .npy files in and out: the format Python users hand tensors around in.
#pragma once

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <string>

namespace smelt::data {

using rt::Expected;
using rt::HostTensor;
using rt::Status;

/// Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian f4 f2 f8 i4 i8 or b1; C order, or
/// Fortran order read into row-major). The header is checked strictly (NpyHeader.h) and the
/// data must be exactly what the shape needs. A path that is not a regular file (a directory,
/// a FIFO, /dev/zero) is refused without reading. Every error names the file and what is
/// wrong, with the byte offset where one applies.
Expected<HostTensor> readNpy(const std::string &path);

/// Writes `tensor` as a format 1.0 .npy file, atomically (rt::writeFileAtomically). NumPy has
/// no bfloat16, so a bf16 tensor is an error that says to convert it first.
Status writeNpy(const std::string &path, const HostTensor &tensor);

} // namespace smelt::data
