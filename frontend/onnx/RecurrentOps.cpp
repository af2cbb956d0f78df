// Converters of ONNX's recurrent layers RNN, GRU and LSTM (opsets 7, 14 and 22), unrolled over
// the sequence at import time as the builder's layers are (frontend/Recurrent.h): each step is
// ops of its own, so the steps fuse, run and differentiate like any other graph. Every step's
// input projection is one matmul over the whole sequence; each step then adds one matmul of the
// state before it. Directions, both layouts, sequence lengths, initial states, clip, peepholes,
// input_forget, linear_before_reset and every named activation are supported.
#include "frontend/onnx/NodeImporter.h"

#include <algorithm>
#include <functional>

namespace smelt::onnx {
namespace {

/// What RNN (1 gate), GRU (3) and LSTM (4) share, read and checked from the node.
struct Layer {
  Tensor x; // [seq_length, batch, input], or [batch, seq_length, input] with layout 1
  bool batchFirst;
  std::string direction; // forward, reverse or bidirectional
  int64_t gates, directions, seqLength, batch, hidden;
  std::optional<double> clip;
  std::optional<Tensor> lengths;                // [batch]; absent when every sequence is whole
  std::vector<RecurrentActivation> activations; // per direction, forward first
  int64_t timeAxis() const { return batchFirst ? 1 : 0; }
  bool reversed(int64_t d) const { return direction == "reverse" || d == 1; }
};

/// Fails unless `t` (the node's `name`) has shape `want`; `meaning` spells it out.
void checkShape(const NodeImporter &n, Tensor t, const char *name, const std::vector<int64_t> &want,
                const char *meaning) {
  if (t.shape() != want)
    fail(ImportErrorKind::BadFile, n.node.op_type() + "'s " + name + " is " +
                                       shapeString(t.shape()) + ", expected " + shapeString(want) +
                                       " (" + meaning + ")");
}

/// Float input `i` (the node's `name`), of the input's type.
Tensor floatOperand(const NodeImporter &n, const Layer &l, int i, const char *name) {
  Tensor t = floatInput(n, i);
  if (t.dtype() != l.x.dtype())
    fail(ImportErrorKind::BadFile, n.node.op_type() + "'s " + name + " is " + dtypeName(t.dtype()) +
                                       " but X is " + dtypeName(l.x.dtype()));
  return t;
}

Layer readLayer(const NodeImporter &n, int64_t gates, const std::vector<std::string> &defaults) {
  Layer l{floatInput(n, 0)};
  l.gates = gates;
  int64_t layout = n.attrInt("layout", 0);
  if (layout != 0 && layout != 1)
    n.unsupported("layout " + std::to_string(layout) + " (0 or 1)");
  l.batchFirst = layout == 1;
  if (l.x.rank() != 3)
    fail(ImportErrorKind::BadFile, n.node.op_type() + "'s X must be " +
                                       (l.batchFirst ? "[batch_size, seq_length, input_size]"
                                                     : "[seq_length, batch_size, input_size]") +
                                       ", got " + shapeString(l.x.shape()));
  l.seqLength = l.x.dim(l.timeAxis());
  l.batch = l.x.dim(1 - l.timeAxis());
  l.direction = n.attrString("direction", "forward");
  if (l.direction != "forward" && l.direction != "reverse" && l.direction != "bidirectional")
    n.unsupported("direction '" + l.direction + "' (forward, reverse or bidirectional)");
  l.directions = l.direction == "bidirectional" ? 2 : 1;

  Tensor r = floatOperand(n, l, 2, "R");
  if (r.rank() != 3)
    fail(ImportErrorKind::BadFile,
         n.node.op_type() + "'s R must be rank 3, got " + shapeString(r.shape()));
  l.hidden = r.dim(2);
  if (n.attribute("hidden_size") && n.attrInt("hidden_size", 0) != l.hidden)
    fail(ImportErrorKind::BadFile, "hidden_size " + std::to_string(n.attrInt("hidden_size", 0)) +
                                       " but R is " + shapeString(r.shape()));
  int64_t width = gates * l.hidden;
  checkShape(n, r, "R", {l.directions, width, l.hidden},
             "num_directions, gates * hidden_size, hidden_size");
  checkShape(n, floatOperand(n, l, 1, "W"), "W", {l.directions, width, l.x.dim(2)},
             "num_directions, gates * hidden_size, input_size");
  if (n.hasInput(3))
    checkShape(n, floatOperand(n, l, 3, "B"), "B", {l.directions, 2 * width},
               "num_directions, 2 * gates * hidden_size");

  if (n.attribute("clip")) {
    l.clip = n.attrFloat("clip", 0);
    if (!(*l.clip > 0))
      n.unsupported("clip " + std::to_string(*l.clip) + " (a threshold must be positive)");
  }
  if (n.hasInput(4)) {
    Tensor lengths = n.input(4);
    if (rt::isFloat(lengths.dtype()) || lengths.dtype() == DType::i1)
      fail(ImportErrorKind::BadFile, n.node.op_type() + "'s sequence_lens must be integers, got " +
                                         dtypeName(lengths.dtype()));
    checkShape(n, lengths, "sequence_lens", {l.batch}, "batch_size");
    bool whole = false;
    if (n.isKnown(4)) {
      const TensorValue &known = n.constantInput(4, "sequence_lens");
      whole = std::all_of(known.values.begin(), known.values.end(),
                          [&](double v) { return v == double(l.seqLength); });
    }
    if (!whole)
      l.lengths = lengths;
  }
  l.activations = recurrentActivations(n, defaults, l.directions);
  return l;
}

/// Entry `i` of `t` along `axis`, without that axis: a direction's weights, a step's input.
Tensor entryAlong(Tensor t, int64_t axis, int64_t i) {
  std::vector<int64_t> shape = t.shape();
  shape.erase(shape.begin() + axis);
  return reshape(pickAlong(t, axis, {i}), shape);
}

/// Columns [k * width, (k + 1) * width) of a [rows, ...] matrix or entries of a vector.
Tensor block(Tensor t, int64_t k, int64_t width) {
  std::vector<int64_t> start(size_t(t.rank()), 0), limit = t.shape();
  start.back() = k * width;
  limit.back() = (k + 1) * width;
  return slice(t, start, limit);
}

/// Direction `d`'s [W_b, R_b] halves of B, each [gates * hidden]; none without B.
std::optional<std::pair<Tensor, Tensor>> biases(const NodeImporter &n, const Layer &l, int64_t d) {
  if (!n.hasInput(3))
    return std::nullopt;
  Tensor b = entryAlong(n.input(3), 0, d);
  return std::make_pair(block(b, 0, l.gates * l.hidden), block(b, 1, l.gates * l.hidden));
}

/// x W_d^T (+ bias) for every step at once: [seq, batch, gates * hidden] (batch first with
/// layout 1), one matmul over all rows.
Tensor projectInputs(const NodeImporter &n, const Layer &l, int64_t d, std::optional<Tensor> bias) {
  Tensor w = entryAlong(n.input(1), 0, d);
  Tensor rows = matmul(reshape(l.x, {l.seqLength * l.batch, l.x.dim(2)}), w, false, true);
  if (bias)
    rows = add(rows, *bias);
  std::vector<int64_t> shape = l.x.shape();
  shape[2] = w.dim(0);
  return reshape(rows, shape);
}

/// Initial state input `i` for direction `d` ([batch, hidden]); zeros when absent.
Tensor initialState(const NodeImporter &n, const Layer &l, int i, int64_t d, const char *name) {
  if (!n.hasInput(i))
    return broadcastTo(scalarLike(l.x, 0), {l.batch, l.hidden});
  Tensor state = floatOperand(n, l, i, name);
  if (l.batchFirst)
    checkShape(n, state, name, {l.batch, l.directions, l.hidden},
               "batch_size, num_directions, hidden_size");
  else
    checkShape(n, state, name, {l.directions, l.batch, l.hidden},
               "num_directions, batch_size, hidden_size");
  return entryAlong(state, l.batchFirst ? 1 : 0, d);
}

/// One step of one direction: the new states ([batch, hidden] each, the hidden state first)
/// from the step's projected input [batch, gates * hidden] and the states before it.
using Step = std::function<std::vector<Tensor>(Tensor input, const std::vector<Tensor> &states)>;
/// A direction: the bias added to every step's projected input, and its step.
struct Direction {
  std::optional<Tensor> inputBias;
  Step step;
};

Tensor clipped(const Layer &l, Tensor x) { return l.clip ? clamp(x, -*l.clip, *l.clip) : x; }

/// Runs every direction over the sequence (each from its initial states, input 5 and on) and
/// sets Y, Y_h and (LSTM) Y_c. Past a sequence's length its states stay as they were and Y is
/// zero, as ONNX Runtime computes them; a reverse direction then starts at the sequence's end.
void convertLayer(NodeImporter &n, const Layer &l, const std::vector<const char *> &stateNames,
                  const std::function<Direction(int64_t d)> &makeDirection) {
  std::vector<int64_t> sequenceShape =
      l.batchFirst ? std::vector<int64_t>{l.batch, l.seqLength, 1, l.hidden}
                   : std::vector<int64_t>{l.seqLength, 1, l.batch, l.hidden};
  std::vector<int64_t> stateShape = l.batchFirst ? std::vector<int64_t>{l.batch, 1, l.hidden}
                                                 : std::vector<int64_t>{1, l.batch, l.hidden};
  int64_t directionAxis = l.batchFirst ? 2 : 1, stateAxis = l.batchFirst ? 1 : 0;
  std::vector<Tensor> sequences;
  std::vector<std::vector<Tensor>> finals(stateNames.size());
  for (int64_t d = 0; d < l.directions; ++d) {
    Direction direction = makeDirection(d);
    Tensor projected = projectInputs(n, l, d, direction.inputBias);
    std::vector<Tensor> states;
    for (size_t s = 0; s < stateNames.size(); ++s)
      states.push_back(initialState(n, l, int(5 + s), d, stateNames[s]));
    std::vector<Tensor> outputs(size_t(l.seqLength), states[0]);
    for (int64_t k = 0; k < l.seqLength; ++k) {
      int64_t t = l.reversed(d) ? l.seqLength - 1 - k : k;
      std::vector<Tensor> next = direction.step(entryAlong(projected, l.timeAxis(), t), states);
      Tensor output = next[0];
      if (l.lengths) {
        Tensor running =
            compare(*l.lengths, scalarLike(*l.lengths, double(t)), CompareDirection::gt);
        Tensor keep = broadcastTo(reshape(running, {l.batch, 1}), {l.batch, l.hidden});
        for (size_t s = 0; s < next.size(); ++s)
          next[s] = select(keep, next[s], states[s]);
        output = select(keep, next[0], broadcastTo(scalarLike(output, 0), output.shape()));
      }
      outputs[size_t(t)] = output;
      states = next;
    }
    // The steps' states side by side ([seq * batch, hidden], or [batch, seq * hidden]), then one
    // reshape: a reshape of each step's state would be a kernel per step.
    if (n.wantsOutput(0))
      sequences.push_back(reshape(concat(outputs, l.timeAxis()), sequenceShape));
    for (size_t s = 0; s < states.size(); ++s)
      finals[s].push_back(reshape(states[s], stateShape));
  }
  if (n.wantsOutput(0))
    n.setOutput(0, sequences.size() == 1 ? sequences[0] : concat(sequences, directionAxis));
  for (size_t s = 0; s < finals.size(); ++s)
    n.setOutput(int(1 + s), finals[s].size() == 1 ? finals[s][0] : concat(finals[s], stateAxis));
}

/// H_t = f(x_t W^T + H_{t-1} R^T + W_b + R_b).
void rnn(NodeImporter &n) {
  Layer l = readLayer(n, 1, {"Tanh"});
  convertLayer(n, l, {"initial_h"}, [&](int64_t d) {
    Tensor r = entryAlong(n.input(2), 0, d);
    std::optional<Tensor> bias;
    if (auto b = biases(n, l, d))
      bias = add(b->first, b->second);
    RecurrentActivation f = l.activations[size_t(d)];
    return Direction{bias, [&l, r, f](Tensor input, const std::vector<Tensor> &states) {
                       return std::vector<Tensor>{
                           f(clipped(l, add(input, matmul(states[0], r, false, true))))};
                     }};
  });
}

/// Gates z, r, h: z = f(x W_z^T + H R_z^T + b_z), r likewise, h = g(x W_h^T + (r H) R_h^T +
/// R_bh + W_bh), or with linear_before_reset g(x W_h^T + r (H R_h^T + R_bh) + W_bh) (PyTorch's
/// GRU); H_t = (1 - z) h + z H_{t-1}.
void gru(NodeImporter &n) {
  Layer l = readLayer(n, 3, {"Sigmoid", "Tanh"});
  bool linearBeforeReset = n.attrInt("linear_before_reset", 0) != 0;
  convertLayer(n, l, {"initial_h"}, [&](int64_t d) {
    Tensor r = entryAlong(n.input(2), 0, d);
    int64_t hidden = l.hidden;
    std::optional<Tensor> inputBias, resetBias;
    if (auto b = biases(n, l, d)) {
      // Only R_bh stays apart, and only with linear_before_reset: r multiplies it.
      Tensor recurrent = b->second;
      if (linearBeforeReset) {
        resetBias = block(recurrent, 2, hidden);
        recurrent = concat(
            {slice(recurrent, {0}, {2 * hidden}), broadcastTo(scalarLike(recurrent, 0), {hidden})},
            0);
      }
      inputBias = add(b->first, recurrent);
    }
    // Without linear_before_reset, R_h multiplies r H, known only after the gates: its own matmul.
    Tensor resetAndUpdate = r, candidateRows = r;
    if (!linearBeforeReset) {
      resetAndUpdate = slice(r, {0, 0}, {2 * hidden, hidden});
      candidateRows = slice(r, {2 * hidden, 0}, {3 * hidden, hidden});
    }
    RecurrentActivation f = l.activations[size_t(2 * d)], g = l.activations[size_t(2 * d + 1)];
    return Direction{
        inputBias, [&l, r, f, g, hidden, linearBeforeReset, resetBias, resetAndUpdate,
                    candidateRows](Tensor input, const std::vector<Tensor> &states) {
          Tensor before = states[0];
          Tensor update, reset, candidate;
          if (linearBeforeReset) {
            Tensor recurrent = matmul(before, r, false, true); // [batch, 3 hidden]
            update = add(block(input, 0, hidden), block(recurrent, 0, hidden));
            reset = add(block(input, 1, hidden), block(recurrent, 1, hidden));
            candidate = block(recurrent, 2, hidden);
            if (resetBias)
              candidate = add(candidate, *resetBias);
            reset = f(clipped(l, reset));
            candidate = add(block(input, 2, hidden), mul(reset, candidate));
          } else {
            Tensor recurrent = matmul(before, resetAndUpdate, false, true);
            update = add(block(input, 0, hidden), block(recurrent, 0, hidden));
            reset = f(clipped(l, add(block(input, 1, hidden), block(recurrent, 1, hidden))));
            candidate = add(block(input, 2, hidden),
                            matmul(mul(reset, before), candidateRows, false, true));
          }
          update = f(clipped(l, update));
          Tensor h = g(clipped(l, candidate));
          Tensor one = scalarLike(update, 1);
          return std::vector<Tensor>{add(mul(sub(one, update), h), mul(update, before))};
        }};
  });
}

/// Gates i, o, f, c: i = f(x W_i^T + H R_i^T + P_i C_{t-1} + b_i), f likewise (or 1 - i with
/// input_forget), c = g(x W_c^T + H R_c^T + b_c), C_t = f C_{t-1} + i c, o = f(x W_o^T + H R_o^T
/// + P_o C_t + b_o), H_t = o h(C_t).
void lstm(NodeImporter &n) {
  Layer l = readLayer(n, 4, {"Sigmoid", "Tanh", "Tanh"});
  bool inputForget = n.attrInt("input_forget", 0) != 0;
  if (n.hasInput(7))
    checkShape(n, floatOperand(n, l, 7, "P"), "P", {l.directions, 3 * l.hidden},
               "num_directions, 3 * hidden_size");
  convertLayer(n, l, {"initial_h", "initial_c"}, [&](int64_t d) {
    Tensor r = entryAlong(n.input(2), 0, d);
    int64_t hidden = l.hidden;
    std::optional<Tensor> bias;
    if (auto b = biases(n, l, d))
      bias = add(b->first, b->second);
    std::optional<Tensor> peephole;
    if (n.hasInput(7))
      peephole = entryAlong(n.input(7), 0, d);
    size_t first = size_t(3 * d);
    RecurrentActivation f = l.activations[first], g = l.activations[first + 1],
                        h = l.activations[first + 2];
    return Direction{bias, [&l, r, f, g, h, hidden, inputForget,
                            peephole](Tensor input, const std::vector<Tensor> &states) {
                       Tensor before = states[0], cell = states[1];
                       Tensor z = add(input, matmul(before, r, false, true));
                       // The gate's pre-activation, with its peephole (P_i, P_o, P_f) on `c`.
                       auto gate = [&](int64_t k, int64_t p, Tensor c) {
                         Tensor pre = block(z, k, hidden);
                         if (peephole)
                           pre = add(pre, mul(block(*peephole, p, hidden), c));
                         return f(clipped(l, pre));
                       };
                       Tensor in = gate(0, 0, cell);
                       Tensor forget = inputForget ? sub(scalarLike(in, 1), in) : gate(2, 2, cell);
                       Tensor next =
                           add(mul(forget, cell), mul(in, g(clipped(l, block(z, 3, hidden)))));
                       Tensor out = gate(1, 1, next);
                       return std::vector<Tensor>{mul(out, h(next)), next};
                     }};
  });
}

} // namespace

void addRecurrentOps(ConverterTable &t) {
  t["RNN"] = rnn;
  t["GRU"] = gru;
  t["LSTM"] = lstm;
}

} // namespace smelt::onnx
