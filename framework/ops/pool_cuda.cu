// cuDNN pooling (max: padding ignored; average: padding excluded from the count), except the
// max-pooling backward pass: cuDNN's deterministic one took 3.5x the memory traffic's time in
// mnist_cnn at batch 1024 (343 us a step on an H200), so it is a kernel of ours that gives each
// window's gradient to the first element equal to the window's max, as the CPU does.
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/cudnn_util.cuh"
#include "ops/pool.h"

namespace loupe {
namespace {

struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolDesc(PoolMode m, const Pool2dParams& p) {
    LOUPE_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
    cudnnPoolingMode_t mode = m == PoolMode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    LOUPE_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d, mode, CUDNN_NOT_PROPAGATE_NAN, p.kernel_h, p.kernel_w, p.pad_h,
                                                  p.pad_w, p.stride_h, p.stride_w));
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d); }
};

cuda::TensorDesc desc(const Tensor& t) {
  return cuda::TensorDesc(int(t.size(0)), int(t.size(1)), int(t.size(2)), int(t.size(3)));
}

void forward(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  cuda::require_f32(x, "pooling");
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingForward(cuda::cudnn(), pd.d, &one, xd.d, x.data_ptr(), &zero, yd.d, y.data_ptr()));
}

struct Geometry {
  int H, W, P, Q, kh, kw, sh, sw, ph, pw;
};

// Row-major position (h * W + w) of the first element of window (i, j) equal to its max m.
__device__ __forceinline__ int first_max(const float* x, const Geometry& g, int i, int j, float m) {
  int h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
  int h1 = min(h0 + g.kh, g.H), w1 = min(w0 + g.kw, g.W);
  for (int h = max(h0, 0); h < h1; ++h)
    for (int w = max(w0, 0); w < w1; ++w)
      if (x[h * g.W + w] == m) return h * g.W + w;
  return -1;  // a NaN max: no element equals it, and no gradient flows (cuDNN's NOT_PROPAGATE_NAN)
}

// Windows that do not overlap (stride >= kernel): one thread per window writes its own elements;
// elements no window covers were zeroed before.
__global__ void max_bwd_disjoint(float* gx, const float* x, const float* y, const float* gy, int64_t planes,
                                 Geometry g) {
  int64_t n = planes * g.P * g.Q;
  LOUPE_KERNEL_LOOP(k, n) {
    int64_t plane = k / (g.P * g.Q);
    int r = int(k % (g.P * g.Q)), i = r / g.Q, j = r % g.Q;
    const float* xp = x + plane * g.H * g.W;
    float* gp = gx + plane * g.H * g.W;
    int best = first_max(xp, g, i, j, y[k]);
    int h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
    for (int h = max(h0, 0); h < min(h0 + g.kh, g.H); ++h)
      for (int w = max(w0, 0); w < min(w0 + g.kw, g.W); ++w) gp[h * g.W + w] = h * g.W + w == best ? gy[k] : 0.f;
  }
}

// Overlapping windows: one thread per input element gathers from every window holding it (no
// atomics, so the sums are deterministic).
__global__ void max_bwd_overlap(float* gx, const float* x, const float* y, const float* gy, int64_t planes,
                                Geometry g) {
  int64_t n = planes * g.H * g.W;
  LOUPE_KERNEL_LOOP(k, n) {
    int64_t plane = k / (g.H * g.W);
    int pos = int(k % (g.H * g.W)), h = pos / g.W, w = pos % g.W;
    const float* xp = x + plane * g.H * g.W;
    const float* yp = y + plane * g.P * g.Q;
    const float* gp = gy + plane * g.P * g.Q;
    // Windows i with i*sh - ph <= h < i*sh - ph + kh.
    int i0 = max(0, (h + g.ph - g.kh + g.sh) / g.sh), i1 = min(g.P - 1, (h + g.ph) / g.sh);
    int j0 = max(0, (w + g.pw - g.kw + g.sw) / g.sw), j1 = min(g.Q - 1, (w + g.pw) / g.sw);
    float acc = 0.f;
    for (int i = i0; i <= i1; ++i)
      for (int j = j0; j <= j1; ++j)
        if (first_max(xp, g, i, j, yp[i * g.Q + j]) == pos) acc += gp[i * g.Q + j];
    gx[k] = acc;
  }
}

void max_backward(const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy, const Pool2dParams& p) {
  Geometry g{int(x.size(2)), int(x.size(3)), int(y.size(2)), int(y.size(3)), p.kernel_h, p.kernel_w,
             p.stride_h,    p.stride_w,    p.pad_h,       p.pad_w};
  int64_t planes = x.size(0) * x.size(1);
  auto s = cuda::stream();
  if (p.stride_h >= p.kernel_h && p.stride_w >= p.kernel_w) {
    // Zero first unless the windows tile the input exactly (mnist_cnn's and cifar10_cnn's 2x2 do
    // when H and W are even).
    bool tiles = p.stride_h == p.kernel_h && p.stride_w == p.kernel_w && p.pad_h == 0 && p.pad_w == 0 &&
                 g.P * p.kernel_h == g.H && g.Q * p.kernel_w == g.W;
    if (!tiles) LOUPE_CUDA_CHECK(cudaMemsetAsync(gx.data_ptr(), 0, gx.nbytes(), s));
    max_bwd_disjoint<<<cuda::blocks_for(planes * g.P * g.Q), cuda::kThreads, 0, s>>>(
        gx.data<float>(), x.data<float>(), y.data<float>(), gy.data<float>(), planes, g);
  } else {
    max_bwd_overlap<<<cuda::blocks_for(planes * g.H * g.W), cuda::kThreads, 0, s>>>(
        gx.data<float>(), x.data<float>(), y.data<float>(), gy.data<float>(), planes, g);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

void backward(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
  cuda::require_f32(x, "pooling backward");
  if (m == PoolMode::Max) return max_backward(gx, x, y, gy, p);
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingBackward(cuda::cudnn(), pd.d, &one, yd.d, y.data_ptr(), yd.d, gy.data_ptr(), xd.d,
                                         x.data_ptr(), &zero, xd.d, gx.data_ptr()));
}

const PoolKernels table{forward, backward};
const RegisterBackend<PoolKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
