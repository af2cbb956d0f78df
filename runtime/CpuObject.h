// Loads an AOT artifact's CPU code: a shared library held as bytes (never as a file on disk)
// becomes the CpuCode an Executable runs its fused kernels through.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace smelt::rt {

/// Writes `sharedLibrary` to an anonymous in-memory file (memfd_create), dlopens it through
/// /proc/self/fd/N (spelled uniquely per load, see CpuObject.cpp) and resolves `symbols` in
/// order, so entries[i] is symbols[i] (null for an empty symbol: a kernel only a GPU runs). The
/// result's `owner` keeps the library loaded (dlclose when the last copy goes). Errors name the missing symbol or give dlopen's reason.
Expected<std::shared_ptr<const CpuCode>> loadCpuObject(const std::vector<uint8_t> &sharedLibrary,
                                                       const std::vector<std::string> &symbols);

} // namespace smelt::rt
