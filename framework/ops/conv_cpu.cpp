// CPU convolution: float32 through oneDNN where the build has it (conv_dnnl.cpp), else im2col +
// GEMM per image, images in parallel when there are several.
#include <atomic>
#include <vector>

#include "autograd/node.h"
#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/conv.h"
#include "ops/conv_cpu.h"
#include "ops/backend/gemm_cpu.h"
#include "ops/view.h"

namespace loupe {
namespace {

struct Geometry {
  int64_t N, C, H, W, K, R, S, P, Q;
};
Geometry geometry(const Tensor& x, const Tensor& w, const Tensor& y) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), y.size(2), y.size(3)};
}

// col[(c, r, s), (p, q)] = x[c, p*sh - ph + r, q*sw - pw + s] (0 outside).
template <class T>
void im2col(const T* x, T* col, const Geometry& g, const Conv2dParams& p) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        T* out = col + ((c * g.R + r) * g.S + s) * g.P * g.Q;
        for (int64_t i = 0; i < g.P; ++i) {
          int64_t h = i * p.stride_h - p.pad_h + r;
          for (int64_t j = 0; j < g.Q; ++j) {
            int64_t ww = j * p.stride_w - p.pad_w + s;
            out[i * g.Q + j] = (h >= 0 && h < g.H && ww >= 0 && ww < g.W) ? x[(c * g.H + h) * g.W + ww] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds col back into gx.
template <class T>
void col2im(const T* col, T* gx, const Geometry& g, const Conv2dParams& p) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        const T* in = col + ((c * g.R + r) * g.S + s) * g.P * g.Q;
        for (int64_t i = 0; i < g.P; ++i) {
          int64_t h = i * p.stride_h - p.pad_h + r;
          if (h < 0 || h >= g.H) continue;
          for (int64_t j = 0; j < g.Q; ++j) {
            int64_t ww = j * p.stride_w - p.pad_w + s;
            if (ww >= 0 && ww < g.W) gx[(c * g.H + h) * g.W + ww] += in[i * g.Q + j];
          }
        }
      }
}

void im2col_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  cpu::dispatch_floating(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    Geometry g = geometry(x, w, y);
    int64_t crs = g.C * g.R * g.S, pq = g.P * g.Q;
    parallel_for(0, g.N, 1, [&](int64_t b, int64_t e) {
      std::vector<T> col(static_cast<size_t>(crs * pq));
      for (int64_t n = b; n < e; ++n) {
        im2col(x.data<T>() + n * g.C * g.H * g.W, col.data(), g, p);
        // y[n] [K, PQ] = w [K, CRS] @ col [CRS, PQ]
        cpu::gemm_builtin<T>(false, false, g.K, pq, crs, T(1), w.data<T>(), crs, col.data(), pq, T(0),
                             y.data<T>() + n * g.K * pq, pq);
      }
    });
  });
}

void im2col_backward(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                     const Conv2dParams& p) {
  cpu::dispatch_floating(x.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    Geometry g = geometry(x, w, gy);
    int64_t crs = g.C * g.R * g.S, pq = g.P * g.Q;
    std::vector<T> col(static_cast<size_t>(crs * pq));
    if (gw.defined()) fill_(gw, 0.0);
    if (gx.defined()) fill_(gx, 0.0);
    for (int64_t n = 0; n < g.N; ++n) {
      const T* gyn = gy.data<T>() + n * g.K * pq;
      if (gw.defined()) {
        im2col(x.data<T>() + n * g.C * g.H * g.W, col.data(), g, p);
        // gw [K, CRS] += gy[n] [K, PQ] @ col^T
        cpu::gemm_builtin<T>(false, true, g.K, crs, pq, T(1), gyn, pq, col.data(), pq, T(1), gw.data<T>(), crs);
      }
      if (gx.defined()) {
        // col = w^T [CRS, K] @ gy[n] [K, PQ], then scattered back
        cpu::gemm_builtin<T>(true, false, crs, pq, g.K, T(1), w.data<T>(), crs, gyn, pq, T(0), col.data(), pq);
        col2im(col.data(), gx.data<T>() + n * g.C * g.H * g.W, g, p);
      }
    }
  });
}

using cpu::detail::ConvPath;
std::atomic<ConvPath> g_path{ConvPath::Auto};

// Auto: oneDNN in its own layouts (`any` + reorders) where built. On the 2-core AVX-512 VM, quiet,
// it beat oneDNN on plain NCHW (there oneDNN runs GEMM-based kernels) and im2col in every
// convolution of mnist_cnn and cifar10_cnn, both directions, the first layers (C = 1, 3) included,
// but for mnist_cnn's first forward where plain was as fast (lab/benchmarks.md, "oneDNN
// convolutions on the CPU"), so there is no per-shape choice.
template <class Run>
void run_path(const Run& run) {
  ConvPath path = g_path.load();
  if (path == ConvPath::Auto) path = ConvPath::DnnlAny;
  if (path == ConvPath::Im2col || !run(path)) run(ConvPath::Im2col);  // no oneDNN, or it refused
}

void conv_forward_nchw(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  if (x.dtype() != DType::f32) return im2col_forward(y, x, w, p);
  run_path([&](ConvPath path) {
    if (path == ConvPath::Im2col) return im2col_forward(y, x, w, p), true;
    return cpu::detail::conv_forward_dnnl(y, x, w, p, path == ConvPath::DnnlAny);
  });
}

void conv_backward_nchw(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                        const Conv2dParams& p) {
  if (x.dtype() != DType::f32) return im2col_backward(gx, gw, x, w, gy, p);
  run_path([&](ConvPath path) {
    if (path == ConvPath::Im2col) return im2col_backward(gx, gw, x, w, gy, p), true;
    return cpu::detail::conv_backward_dnnl(gx, gw, x, w, gy, p, path == ConvPath::DnnlAny);
  });
}

// Channels-last tensors: the loops above read NCHW, so convert in and out (correct, not fast: the
// NHWC layout is for the GPU's tensor cores).
Tensor nchw(const Tensor& t) { return t.defined() ? contiguous(t) : t; }
Tensor nchw_like(const Tensor& t) { return t.defined() ? empty(t.shape(), t.dtype(), t.device()) : t; }
void copy_back(const Tensor& dst, const Tensor& src) {
  if (dst.defined() && !dst.same(src)) copy_(dst, src);
}

void conv_forward(const ExecContext&, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  if (y.is_contiguous() && x.is_contiguous() && w.is_contiguous()) return conv_forward_nchw(y, x, w, p);
  NoGradGuard g;
  Tensor yc = nchw_like(y);
  conv_forward_nchw(yc, nchw(x), nchw(w), p);
  copy_back(y, yc);
}

void conv_backward(const ExecContext&, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                   const Conv2dParams& p) {
  auto ok = [](const Tensor& t) { return !t.defined() || t.is_contiguous(); };
  if (ok(gx) && ok(gw) && ok(x) && ok(w) && ok(gy)) return conv_backward_nchw(gx, gw, x, w, gy, p);
  NoGradGuard g;
  Tensor gxc = gx.defined() && !gx.is_contiguous() ? nchw_like(gx) : gx;
  Tensor gwc = gw.defined() && !gw.is_contiguous() ? nchw_like(gw) : gw;
  conv_backward_nchw(gxc, gwc, nchw(x), nchw(w), nchw(gy), p);
  copy_back(gx, gxc);
  copy_back(gw, gwc);
}

const ConvKernels table{conv_forward, conv_backward};
const RegisterBackend<ConvKernels> reg(DeviceType::CPU, &table);

}  // namespace

namespace cpu::detail {
void set_conv_path(ConvPath path) { g_path.store(path); }
ConvPath conv_path() { return g_path.load(); }
void conv_forward_im2col(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  im2col_forward(y, x, w, p);
}
void conv_backward_im2col(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                          const Conv2dParams& p) {
  im2col_backward(gx, gw, x, w, gy, p);
}
}  // namespace cpu::detail
}  // namespace loupe
