// The builder's element types, apart from the Graph (frontend/Graph.h) so that headers that
// only name a type (the ONNX importer's, for one) need not carry the builder.
#pragma once

namespace smelt {

enum class DType { f32, f16, bf16, f64, i32, i64, i1 };

/// f32, f16, bf16 or f64.
bool isFloatType(DType dtype);

} // namespace smelt
