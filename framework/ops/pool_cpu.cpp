#include <limits>

#include "autograd/node.h"
#include "core/cpu_util.h"
#include "core/dispatch.h"
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

void forward_nchw(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
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

void backward_nchw(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
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
void forward(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (y.is_contiguous() && x.is_contiguous()) return forward_nchw(m, y, x, p);
  NoGradGuard g;
  Tensor yc = empty(y.shape(), y.dtype(), y.device());
  forward_nchw(m, yc, contiguous(x), p);
  copy_(y, yc);
}

void backward(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
  if (gx.is_contiguous() && x.is_contiguous() && y.is_contiguous() && gy.is_contiguous())
    return backward_nchw(m, gx, x, y, gy, p);
  NoGradGuard g;
  Tensor gxc = empty(gx.shape(), gx.dtype(), gx.device());
  backward_nchw(m, gxc, contiguous(x), contiguous(y), contiguous(gy), p);
  copy_(gx, gxc);
}

const PoolKernels table{forward, backward, nullptr, nullptr};  // no fused max pooling: pool, then dropout
const RegisterBackend<PoolKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
