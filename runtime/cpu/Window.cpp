// Plain loops over 2-D windows: f64 convolution and pooling, and the pooling gradients.
#include "runtime/cpu/Window.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace smelt::rt::cpu {

void convLoops(ConvMode mode, const Window2D &g, double *x, double *w, double *y) {
  double *zeroed = mode == ConvMode::Forward ? y : mode == ConvMode::BackwardInput ? x : w;
  int64_t zeroCount = mode == ConvMode::Forward         ? g.n * g.oh * g.ow * g.f
                      : mode == ConvMode::BackwardInput ? g.n * g.h * g.w * g.c
                                                        : g.kh * g.kw * g.c / g.groups * g.f;
  int64_t cg = g.c / g.groups, fg = g.f / g.groups; // channels and filters of one group
  std::fill(zeroed, zeroed + zeroCount, 0.0);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          int64_t iy = oy * g.sh - g.pt + ky * g.dh;
          if (iy < 0 || iy >= g.h)
            continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            int64_t ix = ox * g.sw - g.pl + kx * g.dw;
            if (ix < 0 || ix >= g.w)
              continue;
            double *xs = x + ((b * g.h + iy) * g.w + ix) * g.c;
            double *ys = y + ((b * g.oh + oy) * g.ow + ox) * g.f;
            // Filter element (ky, kx, c % cg, f) in its layout: a stride per c and per f.
            int64_t tap = ky * g.kw + kx;
            double *ws = g.ohwi ? w + tap * cg : w + tap * cg * g.f;
            int64_t cStride = g.ohwi ? 1 : g.f, fStride = g.ohwi ? g.kh * g.kw * cg : 1;
            for (int64_t c = 0; c < g.c; ++c) {
              int64_t group = c / cg;
              double *wc = ws + (c % cg) * cStride;
              for (int64_t f = group * fg; f < (group + 1) * fg; ++f) {
                double &wf = wc[f * fStride];
                if (mode == ConvMode::Forward)
                  ys[f] += xs[c] * wf;
                else if (mode == ConvMode::BackwardInput)
                  xs[c] += ys[f] * wf;
                else
                  wf += xs[c] * ys[f];
              }
            }
          }
        }
}

namespace {
/// Calls fn(outputIndex, b, y0, y1, x0, x1, c, inBoundsCount) for every window of batch entries
/// [b0, b1), channel by channel.
template <typename Fn> void forEachWindow(const Window2D &g, Fn fn, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        int64_t y0 = std::max<int64_t>(oy * g.sh - g.pt, 0);
        int64_t y1 = std::min<int64_t>(oy * g.sh - g.pt + g.kh, g.h);
        int64_t x0 = std::max<int64_t>(ox * g.sw - g.pl, 0);
        int64_t x1 = std::min<int64_t>(ox * g.sw - g.pl + g.kw, g.w);
        int64_t count = (y1 - y0) * (x1 - x0);
        for (int64_t c = 0; c < g.c; ++c) {
          int64_t out = ((b * g.oh + oy) * g.ow + ox) * g.c + c;
          fn(out, b, y0, y1, x0, x1, c, count);
        }
      }
}
} // namespace

void poolForward(bool isMax, const Window2D &g, const double *x, double *y) {
  forEachWindow(g, [&](int64_t out, int64_t b, int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                       int64_t c, int64_t count) {
    double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) {
        double v = x[((b * g.h + iy) * g.w + ix) * g.c + c];
        acc = isMax ? ((v > acc || v != v) ? v : acc) : acc + v;
      }
    y[out] = isMax ? acc : acc / double(count);
  }, 0, g.n);
}

template <typename T>
void poolBackward(bool isMax, const Window2D &g, const T *x, const T *dy, T *dx, int64_t b0,
                  int64_t b1) {
  int64_t image = g.h * g.w * g.c;
  std::fill(dx + b0 * image, dx + b1 * image, T(0));
  forEachWindow(g, [&](int64_t out, int64_t b, int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                       int64_t c, int64_t count) {
    if (!isMax) {
      for (int64_t iy = y0; iy < y1; ++iy)
        for (int64_t ix = x0; ix < x1; ++ix)
          dx[((b * g.h + iy) * g.w + ix) * g.c + c] += dy[out] / T(count);
      return;
    }
    int64_t best = -1;
    T bestValue = 0;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) {
        int64_t at = ((b * g.h + iy) * g.w + ix) * g.c + c;
        // The first maximum, with NaN larger than anything, as in the forward max.
        if (best < 0 || x[at] > bestValue || (x[at] != x[at] && bestValue == bestValue)) {
          best = at;
          bestValue = x[at];
        }
      }
    dx[best] += dy[out];
  }, b0, b1);
}
template void poolBackward<float>(bool, const Window2D &, const float *, const float *, float *,
                                  int64_t, int64_t);
template void poolBackward<double>(bool, const Window2D &, const double *, const double *,
                                   double *, int64_t, int64_t);

} // namespace smelt::rt::cpu
