// Recurrent layers, unrolled over the sequence at build time as XLA compiles a scan with a
// static length: each step is ops of its own, so the whole sequence fuses and differentiates
// like any other graph.
#pragma once

#include "frontend/Layers.h"

namespace smelt {

/// What Keras' recurrent layers take besides their units.
struct RecurrentOptions {
  /// Every step's state [batch, time, units]; false: the last step's [batch, units].
  bool returnSequences = true;
  /// LSTM: the forget gate's bias starts at 1 (Keras' unit_forget_bias, its default), so the
  /// cell state is kept at first rather than halved each step.
  bool unitForgetBias = true;
  /// [batch, time], i1 or a float 0/1 (Keras' mask): a step where it is false (0) leaves that
  /// sequence's states as they were, and with returnSequences its output is the state carried
  /// over (Keras' default, zero_output_for_mask=False). Padding at the end of a sequence then
  /// leaves its last state that of its last real step.
  std::optional<Tensor> mask;
};

/// Keras' LSTM(units) on x [batch, time, features], from zero initial states. Gates in Keras'
/// order (input, forget, cell, output): z = x_t W + h_{t-1} U + b, i = sigmoid(z_i), f =
/// sigmoid(z_f), c_t = f c_{t-1} + i tanh(z_c), h_t = sigmoid(z_o) tanh(c_t). Parameters
/// "<name>/kernel" W [features, 4 units] and "<name>/recurrent_kernel" U [units, 4 units]
/// (Glorot uniform), "<name>/bias" b [4 units] (zeros, the forget slice ones with
/// unitForgetBias). The input projection is one matmul over every step ([batch * time,
/// features] rows); each step adds its slice to one recurrent matmul.
Tensor lstm(Tensor x, int64_t units, const std::string &name, const RecurrentOptions &options = {},
            Loc loc = Loc::current());

/// Keras' GRU(units) with its default reset_after=True on x [batch, time, features], from a
/// zero initial state. Gates in Keras' order (update, reset, candidate): x_t W + b_0 = (xz, xr,
/// xh) and h_{t-1} U + b_1 = (hz, hr, hh); z = sigmoid(xz + hz), r = sigmoid(xr + hr), n =
/// tanh(xh + r hh), h_t = z h_{t-1} + (1 - z) n. Parameters "<name>/kernel" W [features, 3
/// units], "<name>/recurrent_kernel" U [units, 3 units] (Glorot uniform) and "<name>/bias"
/// [2, 3 units] (zeros: the input bias b_0, then the recurrent one b_1).
Tensor gru(Tensor x, int64_t units, const std::string &name, const RecurrentOptions &options = {},
           Loc loc = Loc::current());

} // namespace smelt
