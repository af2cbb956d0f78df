// Builder functions for every smelt op. Each packs its attributes and hands the op to
// Graph::make, which lets the dialect infer and verify it; this file only adds what the IR
// does not do itself: NumPy broadcasting, negative axes, -1 in reshape, scalars.
#include "frontend/Ops.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace smelt {

namespace {

NamedAttribute named(Graph &g, const char *name, Attribute value) {
  return g.builder().getNamedAttr(name, value);
}
NamedAttribute ints(Graph &g, const char *name, llvm::ArrayRef<int64_t> values) {
  return named(g, name, g.builder().getDenseI64ArrayAttr(values));
}
NamedAttribute integer(Graph &g, const char *name, int64_t value) {
  return named(g, name, g.builder().getI64IntegerAttr(value));
}
NamedAttribute real(Graph &g, const char *name, double value) {
  return named(g, name, g.builder().getF64FloatAttr(value));
}

/// The shape `shapes` broadcast to (NumPy's rule: align from the right, a 1 stretches), or a
/// BuildError naming all of them.
std::vector<int64_t> broadcastShape(Graph &g, const std::vector<std::vector<int64_t>> &shapes,
                                    Loc loc) {
  std::vector<int64_t> shape;
  for (const std::vector<int64_t> &b : shapes) {
    std::vector<int64_t> out(std::max(shape.size(), b.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t da = i < shape.size() ? shape[shape.size() - 1 - i] : 1;
      int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
      if (da != db && da != 1 && db != 1) {
        std::string names;
        for (size_t j = 0; j < shapes.size(); ++j)
          names += (j == 0 ? "" : j + 1 == shapes.size() ? " and " : ", ") +
                   shapeString(shapes[j]);
        g.fail(loc, "shapes " + names + " do not broadcast: dimension " + std::to_string(da) +
                        " vs " + std::to_string(db));
      }
      out[out.size() - 1 - i] = da == 1 ? db : da;
    }
    shape = std::move(out);
  }
  return shape;
}

/// Broadcasts every operand to their common shape, so the op sees equal shapes.
std::vector<Tensor> broadcastAll(std::vector<Tensor> xs, Loc loc) {
  Graph &g = xs[0].graph();
  for (size_t i = 0; i < xs.size(); ++i)
    if (&xs[i].graph() != &g)
      g.fail(loc, "operand #" + std::to_string(i) + " belongs to graph @" +
                      xs[i].graph().name() + ", not @" + g.name());
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor &x : xs)
    shapes.push_back(x.shape());
  std::vector<int64_t> shape = broadcastShape(g, shapes, loc);
  for (Tensor &x : xs)
    x = broadcastTo(x, shape, loc);
  return xs;
}

Tensor binary(const char *op, Tensor a, Tensor b, Loc loc) {
  std::vector<Tensor> xs = broadcastAll({a, b}, loc);
  return a.graph().make(op, {xs[0].value(), xs[1].value()}, {}, nullptr, loc);
}

int64_t normalizeAxis(Graph &g, int64_t axis, int64_t rank, Loc loc) {
  if (axis < -rank || axis >= rank)
    g.fail(loc, "axis " + std::to_string(axis) + " is out of range for rank " +
                    std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalizeAxes(Tensor x, std::vector<int64_t> axes, Loc loc) {
  for (int64_t &a : axes)
    a = normalizeAxis(x.graph(), a, x.rank(), loc);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    x.graph().fail(loc, "axes " + shapeString(axes) + " repeat an axis");
  return axes;
}

Tensor reduce(ReduceKind kind, Tensor x, std::vector<int64_t> axes, Loc loc) {
  Graph &g = x.graph();
  axes = normalizeAxes(x, axes, loc);
  return g.make("smelt.reduce", {x.value()},
                {named(g, "kind", ReduceKindAttr::get(&g.context(), kind)), ints(g, "axes", axes)},
                nullptr, loc);
}

Tensor window(const char *op, std::vector<Value> operands, Pair a, Pair b, Quad padding,
              const char *aName, const char *bName, Type resultType, Graph &g, Loc loc,
              std::optional<Pair> dilation = std::nullopt, int64_t groups = 1) {
  std::vector<NamedAttribute> attrs = {ints(g, aName, a), ints(g, bName, b),
                                       ints(g, "padding", padding)};
  if (dilation)
    attrs.push_back(ints(g, "dilation", *dilation));
  if (groups != 1) // the op's default; its verifier refuses a count below 1
    attrs.push_back(named(g, "feature_group_count", g.builder().getI64IntegerAttr(groups)));
  return g.make(op, operands, attrs, resultType, loc);
}

/// The static tensor type; a negative size would silently make a dynamic dimension.
Type tensorType(Graph &g, const std::vector<int64_t> &shape, DType dtype, Loc loc) {
  for (int64_t d : shape)
    if (d < 0)
      g.fail(loc, "shape " + shapeString(shape) + " has a negative dimension");
  return RankedTensorType::get(shape, g.elementType(dtype));
}

} // namespace

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

Tensor constant(Graph &g, const std::vector<double> &values, const std::vector<int64_t> &shape,
                DType dtype, Loc loc) {
  auto type = cast<RankedTensorType>(tensorType(g, shape, dtype, loc));
  if (int64_t(values.size()) != type.getNumElements() && values.size() != 1)
    g.fail(loc, "constant of shape " + shapeString(shape) + " needs " +
                    std::to_string(type.getNumElements()) + " values, got " +
                    std::to_string(values.size()));
  Type element = type.getElementType();
  DenseElementsAttr attr;
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> items;
    for (double v : values) {
      APFloat f(v);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      items.push_back(f);
    }
    attr = DenseElementsAttr::get(type, items);
  } else {
    // Integers truncate toward zero, as convert does; i1 is "v != 0". A value the type cannot
    // hold is an error rather than a silent wrap.
    unsigned width = element.getIntOrFloatBitWidth();
    double limit = std::ldexp(1.0, int(width) - 1);
    SmallVector<APInt> items;
    for (double v : values) {
      if (width > 1 && !(std::trunc(v) >= -limit && std::trunc(v) < limit))
        g.fail(loc, "constant value " + std::to_string(v) + " does not fit " + dtypeName(dtype));
      uint64_t bits = width == 1 ? uint64_t(v != 0) : uint64_t(int64_t(v));
      items.emplace_back(width, bits, /*isSigned=*/width > 1);
    }
    attr = DenseElementsAttr::get(type, items);
  }
  return g.make("smelt.constant", {}, {named(g, "value", attr)}, nullptr, loc);
}

Tensor constant(Graph &g, double value, const std::vector<int64_t> &shape, DType dtype,
                Loc loc) {
  return constant(g, std::vector<double>{value}, shape, dtype, loc);
}

Tensor iota(Graph &g, const std::vector<int64_t> &shape, int64_t dimension, DType dtype,
            Loc loc) {
  dimension = normalizeAxis(g, dimension, int64_t(shape.size()), loc);
  return g.make("smelt.iota", {}, {integer(g, "dimension", dimension)},
                tensorType(g, shape, dtype, loc), loc);
}

static std::vector<Value> offsetOperand(const std::optional<Tensor> &offset) {
  return offset ? std::vector<Value>{offset->value()} : std::vector<Value>{};
}

Tensor rngUniform(Graph &g, const std::vector<int64_t> &shape, uint64_t seed, double low,
                  double high, DType dtype, std::optional<Tensor> offset, Loc loc) {
  return g.make("smelt.rng_uniform", offsetOperand(offset),
                {integer(g, "seed", int64_t(seed)), real(g, "low", low), real(g, "high", high)},
                tensorType(g, shape, dtype, loc), loc);
}

Tensor rngNormal(Graph &g, const std::vector<int64_t> &shape, uint64_t seed, double mean,
                 double stddev, DType dtype, std::optional<Tensor> offset, Loc loc) {
  return g.make("smelt.rng_normal", offsetOperand(offset),
                {integer(g, "seed", int64_t(seed)), real(g, "mean", mean),
                 real(g, "stddev", stddev)},
                tensorType(g, shape, dtype, loc), loc);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Tensor unary(const char *op, Tensor x, Loc loc) {
  return x.graph().make(op, {x.value()}, {}, nullptr, loc);
}

Tensor add(Tensor a, Tensor b, Loc loc) { return binary("smelt.add", a, b, loc); }
Tensor sub(Tensor a, Tensor b, Loc loc) { return binary("smelt.sub", a, b, loc); }
Tensor mul(Tensor a, Tensor b, Loc loc) { return binary("smelt.mul", a, b, loc); }
Tensor div(Tensor a, Tensor b, Loc loc) { return binary("smelt.div", a, b, loc); }
Tensor maximum(Tensor a, Tensor b, Loc loc) { return binary("smelt.max", a, b, loc); }
Tensor minimum(Tensor a, Tensor b, Loc loc) { return binary("smelt.min", a, b, loc); }
Tensor pow(Tensor a, Tensor b, Loc loc) { return binary("smelt.pow", a, b, loc); }
Tensor pow(Tensor a, double exponent, Loc loc) {
  return pow(a, scalarLike(a, exponent, loc), loc);
}

Tensor clamp(Tensor x, double lo, double hi, Loc loc) {
  if (!(lo <= hi))
    x.graph().fail(loc, "clamp: lo (" + std::to_string(lo) + ") must not exceed hi (" +
                            std::to_string(hi) + ")");
  return minimum(maximum(x, scalarLike(x, lo, loc), loc), scalarLike(x, hi, loc), loc);
}

Tensor movingAverage(Tensor average, Tensor value, double momentum, Loc loc) {
  return add(mul(average, scalarLike(average, momentum, loc), loc),
             mul(value, scalarLike(value, 1 - momentum, loc), loc), loc);
}

Tensor compare(Tensor a, Tensor b, CompareDirection direction, Loc loc) {
  Graph &g = a.graph();
  std::vector<Tensor> xs = broadcastAll({a, b}, loc);
  return g.make("smelt.compare", {xs[0].value(), xs[1].value()},
                {named(g, "direction", CompareDirectionAttr::get(&g.context(), direction))},
                nullptr, loc);
}

Tensor select(Tensor pred, Tensor onTrue, Tensor onFalse, Loc loc) {
  std::vector<Tensor> xs = broadcastAll({pred, onTrue, onFalse}, loc);
  return pred.graph().make("smelt.select", {xs[0].value(), xs[1].value(), xs[2].value()}, {},
                           nullptr, loc);
}

Tensor convert(Tensor x, DType dtype, Loc loc) {
  if (x.dtype() == dtype)
    return x;
  Graph &g = x.graph();
  return g.make("smelt.convert", {x.value()}, {}, tensorType(g, x.shape(), dtype, loc), loc);
}

Tensor scalarLike(Tensor like, double value, Loc loc) {
  return constant(like.graph(), value, {}, like.dtype(), loc);
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

Tensor broadcastInDim(Tensor x, const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &dims, Loc loc) {
  Graph &g = x.graph();
  return g.make("smelt.broadcast_in_dim", {x.value()}, {ints(g, "broadcast_dimensions", dims)},
                tensorType(g, shape, x.dtype(), loc), loc);
}

Tensor broadcastTo(Tensor x, const std::vector<int64_t> &shape, Loc loc) {
  if (x.shape() == shape)
    return x;
  Graph &g = x.graph();
  if (x.rank() > int64_t(shape.size()))
    g.fail(loc, "cannot broadcast shape " + shapeString(x.shape()) + " to the smaller rank of " +
                    shapeString(shape));
  // NumPy aligns trailing dimensions.
  std::vector<int64_t> dims(size_t(x.rank()));
  std::iota(dims.begin(), dims.end(), int64_t(shape.size()) - x.rank());
  for (int64_t i = 0; i < x.rank(); ++i)
    if (x.dim(i) != 1 && x.dim(i) != shape[dims[i]])
      g.fail(loc, "cannot broadcast shape " + shapeString(x.shape()) + " to " +
                      shapeString(shape));
  return broadcastInDim(x, shape, dims, loc);
}

Tensor reshape(Tensor x, std::vector<int64_t> shape, Loc loc) {
  Graph &g = x.graph();
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && unknown < 0)
      unknown = int64_t(i);
    else if (shape[i] < 0)
      g.fail(loc, "reshape to " + shapeString(shape) + ": only one dimension may be -1");
    else
      known *= shape[i];
  }
  if (unknown >= 0) {
    if (known == 0 || x.numElements() % known != 0)
      g.fail(loc, "cannot reshape " + shapeString(x.shape()) + " to " + shapeString(shape));
    shape[unknown] = x.numElements() / known;
  }
  if (x.shape() == shape)
    return x;
  return g.make("smelt.reshape", {x.value()}, {}, tensorType(g, shape, x.dtype(), loc), loc);
}

Tensor transpose(Tensor x, const std::vector<int64_t> &permutation, Loc loc) {
  Graph &g = x.graph();
  return g.make("smelt.transpose", {x.value()}, {ints(g, "permutation", permutation)}, nullptr,
                loc);
}

Tensor slice(Tensor x, const std::vector<int64_t> &start, const std::vector<int64_t> &limit,
             std::vector<int64_t> strides, Loc loc) {
  Graph &g = x.graph();
  if (strides.empty())
    strides.assign(start.size(), 1);
  return g.make("smelt.slice", {x.value()},
                {ints(g, "start_indices", start), ints(g, "limit_indices", limit),
                 ints(g, "strides", strides)},
                nullptr, loc);
}

Tensor concat(const std::vector<Tensor> &parts, int64_t axis, Loc loc) {
  if (parts.empty())
    throwBuildError(loc, "concat needs at least one tensor");
  Graph &g = parts[0].graph();
  SmallVector<Value> values;
  for (const Tensor &t : parts)
    values.push_back(t.value());
  return g.make("smelt.concat", values,
                {integer(g, "dimension", normalizeAxis(g, axis, parts[0].rank(), loc))}, nullptr,
                loc);
}

Tensor pad(Tensor x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
           double value, Loc loc) {
  Graph &g = x.graph();
  return g.make("smelt.pad", {x.value()},
                {ints(g, "low", low), ints(g, "high", high), real(g, "value", value)}, nullptr,
                loc);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

Tensor reduceSum(Tensor x, std::vector<int64_t> axes, Loc loc) {
  return reduce(ReduceKind::sum, x, std::move(axes), loc);
}
Tensor reduceMax(Tensor x, std::vector<int64_t> axes, Loc loc) {
  return reduce(ReduceKind::max, x, std::move(axes), loc);
}
Tensor reduceMin(Tensor x, std::vector<int64_t> axes, Loc loc) {
  return reduce(ReduceKind::min, x, std::move(axes), loc);
}

Tensor mean(Tensor x, std::vector<int64_t> axes, Loc loc) {
  axes = normalizeAxes(x, axes, loc);
  int64_t count = 1;
  for (int64_t a : axes)
    count *= x.dim(a);
  Tensor sum = reduceSum(x, axes, loc);
  return div(sum, scalarLike(sum, double(count), loc), loc);
}

/// `reduced` (x reduced over `axes`) with those axes back as size 1.
static Tensor keepReducedDims(Tensor x, Tensor reduced, std::vector<int64_t> axes,
                              KeepDims keep, Loc loc) {
  if (keep == KeepDims::no)
    return reduced;
  axes = normalizeAxes(x, axes, loc);
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    shape.push_back(llvm::is_contained(axes, d) ? 1 : x.dim(d));
  return reshape(reduced, shape, loc);
}

Tensor reduceSum(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc) {
  return keepReducedDims(x, reduceSum(x, axes, loc), axes, keep, loc);
}
Tensor reduceMax(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc) {
  return keepReducedDims(x, reduceMax(x, axes, loc), axes, keep, loc);
}
Tensor reduceMin(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc) {
  return keepReducedDims(x, reduceMin(x, axes, loc), axes, keep, loc);
}
Tensor mean(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc) {
  return keepReducedDims(x, mean(x, axes, loc), axes, keep, loc);
}

Tensor variance(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc) {
  Tensor centered = sub(x, mean(x, axes, KeepDims::yes, loc), loc);
  return mean(mul(centered, centered, loc), axes, keep, loc);
}

Tensor argmax(Tensor x, int64_t axis, Loc loc) {
  Graph &g = x.graph();
  return g.make("smelt.argmax", {x.value()},
                {integer(g, "axis", normalizeAxis(g, axis, x.rank(), loc))}, nullptr, loc);
}

//===----------------------------------------------------------------------===//
// Gather and scatter
//===----------------------------------------------------------------------===//

Tensor gather(Tensor table, Tensor indices, Loc loc) {
  return table.graph().make("smelt.gather", {table.value(), indices.value()}, {}, nullptr, loc);
}

Tensor scatterAdd(Tensor updates, Tensor indices, int64_t rows, Loc loc) {
  Graph &g = updates.graph();
  return g.make("smelt.scatter_add", {updates.value(), indices.value()},
                {integer(g, "size", rows)}, nullptr, loc);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

Tensor allReduce(Tensor x, AllReduceKind kind, int64_t replicas, Loc loc) {
  Graph &g = x.graph();
  return g.make("smelt.all_reduce", {x.value()},
                {named(g, "kind", AllReduceKindAttr::get(&g.context(), kind)),
                 integer(g, "replicas", replicas)},
                x.value().getType(), loc);
}

Tensor replicaId(Graph &g, Loc loc) {
  return g.make("smelt.replica_id", {}, {}, tensorType(g, {}, DType::i64, loc), loc);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

Tensor matmul(Tensor a, Tensor b, bool transposeA, bool transposeB, Loc loc) {
  Graph &g = a.graph();
  // NumPy's matmul on [..., M, K] x [..., K, N]: the batch dimensions broadcast. The op takes
  // equal batch dimensions; a rank-2 right side folds the left's batch into its rows instead,
  // so [B, T, D] x [D, E] is one GEMM.
  if (a.rank() >= 2 && b.rank() >= 2 && &a.graph() == &b.graph()) {
    std::vector<int64_t> batchA = a.shape(), batchB = b.shape();
    batchA.resize(batchA.size() - 2);
    batchB.resize(batchB.size() - 2);
    if (batchA != batchB) {
      if (batchB.empty() && !transposeA) {
        std::vector<int64_t> outShape = a.shape();
        Tensor rows = reshape(a, {-1, a.dim(-1)}, loc);
        Tensor product = matmul(rows, b, false, transposeB, loc);
        outShape.back() = product.dim(1);
        return reshape(product, outShape, loc);
      }
      std::vector<int64_t> batch = broadcastShape(g, {batchA, batchB}, loc);
      auto withBatch = [&](Tensor x) {
        std::vector<int64_t> shape = batch;
        shape.push_back(x.dim(-2));
        shape.push_back(x.dim(-1));
        return broadcastTo(x, shape, loc);
      };
      a = withBatch(a);
      b = withBatch(b);
    }
  }
  std::vector<NamedAttribute> attrs;
  if (transposeA)
    attrs.push_back(named(g, "transpose_lhs", g.builder().getUnitAttr()));
  if (transposeB)
    attrs.push_back(named(g, "transpose_rhs", g.builder().getUnitAttr()));
  return g.make("smelt.matmul", {a.value(), b.value()}, attrs, nullptr, loc);
}

Tensor conv2d(Tensor input, Tensor filter, Pair strides, Quad padding, Pair dilation,
              int64_t groups, Loc loc) {
  return window("smelt.conv2d", {input.value(), filter.value()}, strides, dilation, padding,
                "strides", "dilation", nullptr, input.graph(), loc, std::nullopt, groups);
}

Tensor conv2dBackwardInput(Tensor gradOutput, Tensor filter,
                           const std::vector<int64_t> &inputShape, Pair strides, Quad padding,
                           Pair dilation, int64_t groups, Loc loc) {
  Graph &g = gradOutput.graph();
  return window("smelt.conv2d_backward_input", {gradOutput.value(), filter.value()}, strides,
                dilation, padding, "strides", "dilation",
                tensorType(g, inputShape, gradOutput.dtype(), loc), g, loc, std::nullopt,
                groups);
}

Tensor conv2dBackwardFilter(Tensor input, Tensor gradOutput,
                            const std::vector<int64_t> &filterShape, Pair strides, Quad padding,
                            Pair dilation, int64_t groups, Loc loc) {
  Graph &g = input.graph();
  return window("smelt.conv2d_backward_filter", {input.value(), gradOutput.value()}, strides,
                dilation, padding, "strides", "dilation",
                tensorType(g, filterShape, input.dtype(), loc), g, loc, std::nullopt, groups);
}

Tensor maxPool2d(Tensor input, Pair windowSize, Pair strides, Quad padding, Loc loc) {
  return window("smelt.max_pool2d", {input.value()}, windowSize, strides, padding, "window",
                "strides", nullptr, input.graph(), loc);
}

Tensor avgPool2d(Tensor input, Pair windowSize, Pair strides, Quad padding, Loc loc) {
  return window("smelt.avg_pool2d", {input.value()}, windowSize, strides, padding, "window",
                "strides", nullptr, input.graph(), loc);
}

Tensor maxPool2dBackward(Tensor input, Tensor gradOutput, Pair windowSize, Pair strides,
                         Quad padding, Loc loc) {
  return window("smelt.max_pool2d_backward", {input.value(), gradOutput.value()}, windowSize,
                strides, padding, "window", "strides", nullptr, input.graph(), loc);
}

Tensor avgPool2dBackward(Tensor gradOutput, const std::vector<int64_t> &inputShape,
                         Pair windowSize, Pair strides, Quad padding, Loc loc) {
  Graph &g = gradOutput.graph();
  return window("smelt.avg_pool2d_backward", {gradOutput.value()}, windowSize, strides, padding,
                "window", "strides", tensorType(g, inputShape, gradOutput.dtype(), loc), g, loc);
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

Tensor operator+(Located a, Tensor b) { return add(a.tensor, b, a.loc); }
Tensor operator-(Located a, Tensor b) { return sub(a.tensor, b, a.loc); }
Tensor operator*(Located a, Tensor b) { return mul(a.tensor, b, a.loc); }
Tensor operator/(Located a, Tensor b) { return div(a.tensor, b, a.loc); }

// A double operand becomes a rank-0 constant of the tensor's dtype; broadcasting does the rest.
static Tensor scalarFor(const Located &x, double v) { return scalarLike(x.tensor, v, x.loc); }

Tensor operator+(Located a, double b) { return add(a.tensor, scalarFor(a, b), a.loc); }
Tensor operator-(Located a, double b) { return sub(a.tensor, scalarFor(a, b), a.loc); }
Tensor operator*(Located a, double b) { return mul(a.tensor, scalarFor(a, b), a.loc); }
Tensor operator/(Located a, double b) { return div(a.tensor, scalarFor(a, b), a.loc); }
Tensor operator+(double a, Located b) { return add(scalarFor(b, a), b.tensor, b.loc); }
Tensor operator-(double a, Located b) { return sub(scalarFor(b, a), b.tensor, b.loc); }
Tensor operator*(double a, Located b) { return mul(scalarFor(b, a), b.tensor, b.loc); }
Tensor operator/(double a, Located b) { return div(scalarFor(b, a), b.tensor, b.loc); }
Tensor operator-(Located a) { return neg(a.tensor, a.loc); }

} // namespace smelt
