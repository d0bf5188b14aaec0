#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "autograd/node.h"
#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/dropout_mask.h"
#include "ops/pool.h"
#include "ops/view.h"

namespace loupe {
namespace {

// Calls f(h, w) for every in-bounds position of output (i, j)'s window.
template <class F>
void window(int64_t i, int64_t j, int64_t H, int64_t W, const Pool2dParams& p, F&& f) {
  for (int64_t r = 0; r < p.kernel_h; ++r) {
    int64_t h = i * p.stride_h - p.pad_h + r;
    if (h < 0 || h >= H) continue;
    for (int64_t s = 0; s < p.kernel_w; ++s) {
      int64_t w = j * p.stride_w - p.pad_w + s;
      if (w >= 0 && w < W) f(h, w);
    }
  }
}

// Max pooling whose windows tile the input (kernel == stride, no padding: every pool in the
// reference models), NCHW, with the dropout that follows it fused in (d.on) or not. Each input
// element lies in at most one window, so backward writes each gradient plane once, with no
// bounds checks and no separate zero pass over gx. The same arithmetic as the general loops below
// and as pooling then dropout(): the max folded from -inf with std::max in window order, the
// first element equal to it takes the gradient, element e of y kept as dropout() keeps it
// (core/dropout_mask.h), and y * scale rounded to T.
bool tiles(const Pool2dParams& p) {
  return p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0;
}

// One plane's windows; K x K fixed at compile time for the common 2x2 and 3x3 windows (K = 0: the
// runtime kh x kw), which lets the compiler unroll them: the runtime-sized loops cost ~20 cycles an
// output, a few times the memory traffic's time (ops_perf, lab/benchmarks.md).
template <class T, int K>
void forward_plane(const T* xp, T* yp, int64_t W, int64_t P, int64_t Q, int64_t kh_rt, int64_t kw_rt,
                   const PoolDropout& d, DropoutMask& keep, uint64_t first, T scale) {
  const int64_t kh = K ? K : kh_rt, kw = K ? K : kw_rt;
  for (int64_t i = 0; i < P; ++i) {
    const T* row = xp + i * kh * W;
    for (int64_t j = 0; j < Q; ++j) {
      T best = -std::numeric_limits<T>::infinity();
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t c = 0; c < kw; ++c) best = std::max(best, row[r * W + j * kw + c]);
      yp[i * Q + j] = !d.on ? best : keep.keep(first + uint64_t(i * Q + j)) ? T(best * scale) : T(0);
    }
  }
}

template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
template <class T>
BitsOf<T> bits_of(T v) {
  BitsOf<T> b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
template <class T>
T from_bits(BitsOf<T> b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

template <class T, int K>
void backward_plane(const T* xp, const T* gp, T* gxp, int64_t W, int64_t P, int64_t Q, int64_t kh_rt,
                    int64_t kw_rt, const PoolDropout& d, DropoutMask& keep, uint64_t first, T scale) {
  using Bits = BitsOf<T>;
  const int64_t kh = K ? K : kh_rt, kw = K ? K : kw_rt;
  for (int64_t i = 0; i < P; ++i) {
    const T* row = xp + i * kh * W;
    T* grow = gxp + i * kh * W;
    for (int64_t j = 0; j < Q; ++j) {
      T g = gp[i * Q + j];
      if (d.on) g = keep.keep(first + uint64_t(i * Q + j)) ? T(g * scale) : T(0);
      T best = -std::numeric_limits<T>::infinity();
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t c = 0; c < kw; ++c) best = std::max(best, row[r * W + j * kw + c]);
      // Every window position written, the first max gets g, without branches: which position
      // holds the max is data, and mispredicting it cost more than the rest. The test is on bit
      // patterns (no NaN branches): best is the bits of the window's first element equal to the
      // max (std::max keeps the earlier of equals), so the first float-equal element and the first
      // bit-equal one are the same, +0 / -0 included; no element matches an all-NaN window's -inf.
      const Bits want = bits_of(best), gb = bits_of(g);
      Bits taken = 0;
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t c = 0; c < kw; ++c) {
          const Bits hit = ~taken & (Bits(0) - Bits(bits_of(row[r * W + j * kw + c]) == want));
          taken |= hit;
          grow[r * W + j * kw + c] = from_bits<T>(gb & hit);
        }
    }
  }
}

// Calls f(std::integral_constant<int, K>) with K the window's side for 2x2 and 3x3 windows, else 0.
template <class F>
void with_window(const Pool2dParams& p, F&& f) {
  if (p.kernel_h == 2 && p.kernel_w == 2) return f(std::integral_constant<int, 2>{});
  if (p.kernel_h == 3 && p.kernel_w == 3) return f(std::integral_constant<int, 3>{});
  f(std::integral_constant<int, 0>{});
}

void max_tiled_forward(const Tensor& y, const Tensor& x, const Pool2dParams& p, const PoolDropout& d) {
  cpu::dispatch_floating(x.dtype(), "max pooling", [&](auto tag) {
    using T = decltype(tag);
    const int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
    const T scale = T(1) / (T(1) - T(d.p));
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    with_window(p, [&](auto k) {
      constexpr int K = decltype(k)::value;
      parallel_for(0, NC, 1, [&](int64_t b, int64_t e) {
        DropoutMask keep(d.rng.seed, d.rng.offset, d.p);
        for (int64_t nc = b; nc < e; ++nc)
          forward_plane<T, K>(xd + nc * H * W, yd + nc * P * Q, W, P, Q, p.kernel_h, p.kernel_w, d, keep,
                                 uint64_t(nc * P * Q), scale);
      });
    });
  });
}

void max_tiled_backward(const Tensor& gx, const Tensor& x, const Tensor& gy, const Pool2dParams& p,
                        const PoolDropout& d) {
  cpu::dispatch_floating(x.dtype(), "max pooling backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), P = gy.size(2), Q = gy.size(3);
    const T scale = T(1) / (T(1) - T(d.p));
    const T* xd = x.data<T>();
    const T* gd = gy.data<T>();
    T* gxd = gx.data<T>();
    const bool edges = P * p.kernel_h != H || Q * p.kernel_w != W;  // rows or columns no window covers
    with_window(p, [&](auto k) {
      constexpr int K = decltype(k)::value;
      parallel_for(0, NC, 1, [&](int64_t b, int64_t e) {
        DropoutMask keep(d.rng.seed, d.rng.offset, d.p);
        for (int64_t nc = b; nc < e; ++nc) {
          T* gxp = gxd + nc * H * W;
          if (edges) std::fill(gxp, gxp + H * W, T(0));  // in cache; the windows overwrite theirs
          backward_plane<T, K>(xd + nc * H * W, gd + nc * P * Q, gxp, W, P, Q, p.kernel_h, p.kernel_w, d, keep,
                                  uint64_t(nc * P * Q), scale);
        }
      });
    });
  });
}

bool contiguous_all(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!t->is_contiguous()) return false;
  return true;
}

bool max_forward_fused(const ExecContext&, const Tensor& y, const Tensor& x, const Pool2dParams& p,
                       const PoolDropout& d) {
  if (!tiles(p) || !contiguous_all({&y, &x})) return false;
  max_tiled_forward(y, x, p, d);
  return true;
}

bool max_backward_fused(const ExecContext&, const Tensor& gx, const Tensor& x, const Tensor& gy,
                        const Pool2dParams& p, const PoolDropout& d) {
  if (!tiles(p) || !contiguous_all({&gx, &x, &gy})) return false;
  max_tiled_backward(gx, x, gy, p, d);
  return true;
}

void pool_forward_nchw(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (m == PoolMode::Max && tiles(p)) return max_tiled_forward(y, x, p, PoolDropout{});
  cpu::dispatch_floating(x.dtype(), "pooling", [&](auto tag) {
    using T = decltype(tag);
    int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
    parallel_for(0, NC, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const T* xp = x.data<T>() + nc * H * W;
        T* yp = y.data<T>() + nc * P * Q;
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < Q; ++j) {
            T best = -std::numeric_limits<T>::infinity(), sum = 0;
            int64_t count = 0;
            window(i, j, H, W, p, [&](int64_t h, int64_t w) {
              best = std::max(best, xp[h * W + w]);
              sum += xp[h * W + w];
              ++count;
            });
            yp[i * Q + j] = m == PoolMode::Max ? best : sum / T(count);
          }
      }
    });
  });
}

void pool_backward_nchw(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
  if (m == PoolMode::Max && tiles(p)) return max_tiled_backward(gx, x, gy, p, PoolDropout{});
  cpu::dispatch_floating(x.dtype(), "pooling backward", [&](auto tag) {
    using T = decltype(tag);
    fill_(gx, 0.0);
    int64_t NC = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
    parallel_for(0, NC, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const T* xp = x.data<T>() + nc * H * W;
        const T* yp = y.data<T>() + nc * P * Q;
        const T* gp = gy.data<T>() + nc * P * Q;
        T* gxp = gx.data<T>() + nc * H * W;
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < Q; ++j) {
            T g = gp[i * Q + j];
            if (m == PoolMode::Max) {  // the first element equal to the max takes the gradient
              bool done = false;
              window(i, j, H, W, p, [&](int64_t h, int64_t w) {
                if (!done && xp[h * W + w] == yp[i * Q + j]) {
                  gxp[h * W + w] += g;
                  done = true;
                }
              });
            } else {
              int64_t count = 0;
              window(i, j, H, W, p, [&](int64_t, int64_t) { ++count; });
              window(i, j, H, W, p, [&](int64_t h, int64_t w) { gxp[h * W + w] += g / T(count); });
            }
          }
      }
    });
  });
}

// Channels-last: the loops above read NCHW, so convert in and out.
void pool_forward(const ExecContext&, PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (y.is_contiguous() && x.is_contiguous()) return pool_forward_nchw(m, y, x, p);
  NoGradGuard g;
  Tensor yc = empty(y.shape(), y.dtype(), y.device());
  pool_forward_nchw(m, yc, contiguous(x), p);
  copy_(y, yc);
}

void pool_backward(const ExecContext&, PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
                   const Pool2dParams& p) {
  if (gx.is_contiguous() && x.is_contiguous() && y.is_contiguous() && gy.is_contiguous())
    return pool_backward_nchw(m, gx, x, y, gy, p);
  NoGradGuard g;
  Tensor gxc = empty(gx.shape(), gx.dtype(), gx.device());
  pool_backward_nchw(m, gxc, contiguous(x), contiguous(y), contiguous(gy), p);
  copy_(gx, gxc);
}

const PoolKernels table{pool_forward, pool_backward, max_forward_fused, max_backward_fused};
const RegisterBackend<PoolKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
