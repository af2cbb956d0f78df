// Geometry of 2-D windows (convolutions and pooling, NHWC) and the plain loops over it that
// serve f64 (oneDNN has no f64) and the pooling gradients.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <cstdint>

namespace smelt::rt::cpu {

struct Window2D {
  int64_t n, h, w, c;          // input NHWC
  int64_t kh, kw, f;           // window (filter HWIO: kh, kw, c, f; pooling: f == c)
  int64_t oh, ow;              // output spatial size
  int64_t sh, sw;              // strides
  int64_t pt, pb, pl, pr;      // padding
  int64_t dh = 1, dw = 1;      // dilation
  int64_t groups = 1;          // convolution feature groups: filter [kh, kw, c / groups, f]
  bool ohwi = false;           // the filter is stored [f, kh, kw, c / groups]
};

/// Which of the three convolution products a loop computes.
enum class ConvMode { Forward, BackwardInput, BackwardFilter };

/// Plain convolution in double: Forward y += x*w, BackwardInput dx += dy*w, BackwardFilter
/// dw += x*dy, with zeroed outputs. Pointers are x (NHWC), w (HWIO, [kh, kw, c/groups, f], or
/// OHWI [f, kh, kw, c/groups] when g.ohwi),
/// y (N,OH,OW,F); group k reads channels [k*c/groups, (k+1)*c/groups) for outputs
/// [k*f/groups, (k+1)*f/groups).
void convLoops(ConvMode mode, const Window2D &g, double *x, double *w, double *y);

/// Plain pooling in double. Forward writes y from x; backward adds dy into dx (zeroed first):
/// max routes to the first maximum of each window, avg spreads over the in-bounds elements.
void poolForward(bool isMax, const Window2D &g, const double *x, double *y);
/// The backward for batch entries [b0, b1) only, in T (float or double): ranges of the batch
/// write disjoint parts of dx, so they run in parallel. In float each element of dx sums the
/// few windows that overlap it, as oneDNN's f32 pooling does.
template <typename T>
void poolBackward(bool isMax, const Window2D &g, const T *x, const T *dy, T *dx, int64_t b0,
                  int64_t b1);

} // namespace smelt::rt::cpu
