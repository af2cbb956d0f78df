// Reading a float splat constant through the broadcasts and reshapes that shape it: how the
// gradient rules and the kernels recognize a constant exponent.
#pragma once

#include "mlir/IR/Value.h"

#include <optional>

namespace smelt {

/// The value of `value` when it is a smelt.constant float splat, or one broadcast or reshaped;
/// nullopt otherwise.
std::optional<double> floatSplatConstant(mlir::Value value);

} // namespace smelt
