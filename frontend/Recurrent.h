// Recurrent layers, unrolled over the sequence at build time as XLA compiles a scan with a
// static length: each step is ops of its own, so the whole sequence fuses and differentiates
// like any other graph.
#pragma once

#include "frontend/Layers.h"

namespace smelt {

/// Keras' LSTM(units, return_sequences=True) on x [batch, time, features]: hidden states
/// [batch, time, units] from zero initial states. Gates in Keras' order (input, forget, cell,
/// output): z = x_t W + h_{t-1} U + b, i = sigmoid(z_i), f = sigmoid(z_f), c_t = f c_{t-1} +
/// i tanh(z_c), h_t = sigmoid(z_o) tanh(c_t). Parameters "<name>/kernel" W [features, 4 units]
/// and "<name>/recurrent_kernel" U [units, 4 units] (Glorot uniform), "<name>/bias" b
/// [4 units] (zeros). The input projection is one matmul over every step ([batch * time,
/// features] rows); each step adds its slice to one recurrent matmul.
Tensor lstm(Tensor x, int64_t units, const std::string &name, Loc loc = Loc::current());

} // namespace smelt
