// The process's oneDNN CPU engine and stream, and a checked way to build primitives.
#pragma once

#include "runtime/Status.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <string>

namespace smelt::rt::cpu {

dnnl::engine &oneDnnEngine();
dnnl::stream &oneDnnStream();

/// Runs `build` and turns a dnnl::error into a Status that says which step it was for.
Status oneDnnChecked(const std::string &what, const std::function<void()> &build);

} // namespace smelt::rt::cpu
