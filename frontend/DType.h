// The builder's element types: the runtime's enum (runtime/DType.h), one for the whole of Smelt,
// named here apart from the Graph (frontend/Graph.h) so that headers that only name a type (the
// ONNX importer's, for one) need not carry the builder.
#pragma once

#include "runtime/DType.h"

namespace smelt {

using DType = rt::DType;
/// "f32", "bf16", "i1" ...: the MLIR spelling.
using rt::dtypeName;

} // namespace smelt
