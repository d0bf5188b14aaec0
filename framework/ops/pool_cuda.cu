// cuDNN pooling (max: padding ignored; average: padding excluded from the count), except the
// max-pooling backward pass: cuDNN's deterministic one took 3.5x the memory traffic's time in
// mnist_cnn at batch 1024 (343 us a step on an H200), so it is a kernel of ours that gives each
// window's gradient to the first element equal to the window's max, as the CPU does.
// float32, float16 and bfloat16 (cuDNN's descriptors in the storage type, its arithmetic and ours
// in float).
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

// From the tensor's strides: NCHW and channels-last alike. cuda::TensorDesc describes float32;
// float16 and bfloat16 re-set it with their own data type (same sizes and strides).
cuda::TensorDesc desc(const Tensor& t) {
  cuda::TensorDesc d(t);
  if (t.dtype() != DType::f32) {
    cudnnDataType_t type = t.dtype() == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    const Shape& s = t.strides();
    LOUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(d.d, type, int(t.size(0)), int(t.size(1)), int(t.size(2)),
                                                   int(t.size(3)), int(s[0]), int(s[1]), int(s[2]), int(s[3])));
  }
  return d;
}

void forward(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  cuda::require_float(x, "pooling");
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingForward(cuda::cudnn(), pd.d, &one, xd.d, x.data_ptr(), &zero, yd.d, y.data_ptr()));
}

struct Geometry {
  int N, C, H, W, P, Q, kh, kw, sh, sw, ph, pw;
  bool nhwc;  // x, y, gx, gy all channels-last (else all NCHW)
  // Element offsets in x (H x W planes) and y (P x Q planes) for either layout.
  __device__ int64_t xoff(int64_t n, int c, int h, int w) const {
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
  }
  __device__ int64_t yoff(int64_t n, int c, int i, int j) const {
    return nhwc ? ((n * P + i) * Q + j) * C + c : ((n * C + c) * P + i) * Q + j;
  }
  // Flat index k in memory order -> (n, c, a, b) over an A x B plane (channel fastest when nhwc).
  __device__ void split(int64_t k, int A, int B, int64_t& n, int& c, int& a, int& b) const {
    if (nhwc) {
      c = int(k % C); k /= C;
      b = int(k % B); k /= B;
      a = int(k % A); n = k / A;
    } else {
      b = int(k % B); k /= B;
      a = int(k % A); k /= A;
      c = int(k % C); n = k / C;
    }
  }
};

// (h, w) of the first element of window (i, j) of plane (n, c), row-major, equal to its max m;
// h = -1 for a NaN max: no element equals it, and no gradient flows (cuDNN's NOT_PROPAGATE_NAN).
template <class T>
__device__ __forceinline__ void first_max(const T* x, const Geometry& g, int64_t n, int c, int i, int j, float m,
                                          int& bh, int& bw) {
  int h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
  int h1 = min(h0 + g.kh, g.H), w1 = min(w0 + g.kw, g.W);
  for (int h = max(h0, 0); h < h1; ++h)
    for (int w = max(w0, 0); w < w1; ++w)
      if (cuda::to_float(x[g.xoff(n, c, h, w)]) == m) {
        bh = h;
        bw = w;
        return;
      }
  bh = bw = -1;
}

// Windows that do not overlap (stride >= kernel): one thread per window writes its own elements;
// elements no window covers were zeroed before.
template <class T>
__global__ void max_bwd_disjoint(T* gx, const T* x, const T* y, const T* gy, Geometry g) {
  int64_t total = int64_t(g.N) * g.C * g.P * g.Q;
  LOUPE_KERNEL_LOOP(k, total) {
    int64_t n;
    int c, i, j;
    g.split(k, g.P, g.Q, n, c, i, j);
    int64_t yo = g.yoff(n, c, i, j);
    int bh, bw;
    first_max(x, g, n, c, i, j, cuda::to_float(y[yo]), bh, bw);
    int h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
    T grad = gy[yo], zero = cuda::from_float<T>(0.f);
    for (int h = max(h0, 0); h < min(h0 + g.kh, g.H); ++h)
      for (int w = max(w0, 0); w < min(w0 + g.kw, g.W); ++w)
        gx[g.xoff(n, c, h, w)] = h == bh && w == bw ? grad : zero;
  }
}

// Overlapping windows: one thread per input element gathers from every window holding it (no
// atomics, so the sums are deterministic); the sum is float whatever T is.
template <class T>
__global__ void max_bwd_overlap(T* gx, const T* x, const T* y, const T* gy, Geometry g) {
  int64_t total = int64_t(g.N) * g.C * g.H * g.W;
  LOUPE_KERNEL_LOOP(k, total) {
    int64_t n;
    int c, h, w;
    g.split(k, g.H, g.W, n, c, h, w);
    // Windows i with i*sh - ph <= h < i*sh - ph + kh.
    int i0 = max(0, (h + g.ph - g.kh + g.sh) / g.sh), i1 = min(g.P - 1, (h + g.ph) / g.sh);
    int j0 = max(0, (w + g.pw - g.kw + g.sw) / g.sw), j1 = min(g.Q - 1, (w + g.pw) / g.sw);
    float acc = 0.f;
    for (int i = i0; i <= i1; ++i)
      for (int j = j0; j <= j1; ++j) {
        int64_t yo = g.yoff(n, c, i, j);
        int bh, bw;
        first_max(x, g, n, c, i, j, cuda::to_float(y[yo]), bh, bw);
        if (bh == h && bw == w) acc += cuda::to_float(gy[yo]);
      }
    gx[g.xoff(n, c, h, w)] = cuda::from_float<T>(acc);
  }
}

void max_backward(const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy, const Pool2dParams& p) {
  Geometry g{int(x.size(0)), int(x.size(1)), int(x.size(2)), int(x.size(3)), int(y.size(2)), int(y.size(3)),
             p.kernel_h,     p.kernel_w,     p.stride_h,     p.stride_w,     p.pad_h,        p.pad_w,
             x.memory_format() == MemoryFormat::ChannelsLast};
  auto s = cuda::stream();
  if (p.stride_h >= p.kernel_h && p.stride_w >= p.kernel_w) {
    // Zero first unless the windows tile the input exactly (mnist_cnn's and cifar10_cnn's 2x2 do
    // when H and W are even).
    bool tiles = p.stride_h == p.kernel_h && p.stride_w == p.kernel_w && p.pad_h == 0 && p.pad_w == 0 &&
                 g.P * p.kernel_h == g.H && g.Q * p.kernel_w == g.W;
    if (!tiles) LOUPE_CUDA_CHECK(cudaMemsetAsync(gx.data_ptr(), 0, gx.nbytes(), s));
    cuda::dispatch_float(x.dtype(), "pooling backward", [&](auto tag) {
      using T = decltype(tag);
      max_bwd_disjoint<T><<<cuda::blocks_for(y.numel()), cuda::kThreads, 0, s>>>(gx.data<T>(), x.data<T>(),
                                                                                 y.data<T>(), gy.data<T>(), g);
    });
  } else {
    cuda::dispatch_float(x.dtype(), "pooling backward", [&](auto tag) {
      using T = decltype(tag);
      max_bwd_overlap<T><<<cuda::blocks_for(x.numel()), cuda::kThreads, 0, s>>>(gx.data<T>(), x.data<T>(),
                                                                                y.data<T>(), gy.data<T>(), g);
    });
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

void backward(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
  cuda::require_float(x, "pooling backward");
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
