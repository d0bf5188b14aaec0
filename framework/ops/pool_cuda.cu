// cuDNN pooling (max: padding ignored; average: padding excluded from the count), except the
// max-pooling backward pass: cuDNN's deterministic one took several times the memory traffic's time
// in mnist_cnn (lab/benchmarks.md, "The step as one CUDA graph, and fewer kernels"), so it is a
// kernel of ours that gives each window's gradient to the first element equal to the window's max,
// as the CPU does. Max pooling of disjoint windows in channels-last memory (the CNNs' 2x2 pools in
// fp16/bf16) has kernels of its own that also apply the dropout after it, 16 bytes of channels a
// thread (below).
// float32, float16 and bfloat16 (cuDNN's descriptors in the storage type, its arithmetic and ours
// in float).
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/backend/cudnn_util.cuh"
#include "ops/backend/channel_sums.cuh"
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

void pool_forward(const ExecContext& ctx, PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  cuda::require_float(x, "pooling");
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(
      cudnnPoolingForward(cuda::cudnn(ctx), pd.d, &one, xd.d, x.data_ptr(), &zero, yd.d, y.data_ptr()));
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

void max_backward(const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy, const Pool2dParams& p,
                  cudaStream_t stream) {
  Geometry g{int(x.size(0)), int(x.size(1)), int(x.size(2)), int(x.size(3)), int(y.size(2)), int(y.size(3)),
             p.kernel_h,     p.kernel_w,     p.stride_h,     p.stride_w,     p.pad_h,        p.pad_w,
             x.memory_format() == MemoryFormat::ChannelsLast};
  if (p.stride_h >= p.kernel_h && p.stride_w >= p.kernel_w) {
    // Zero first unless the windows tile the input exactly (mnist_cnn's and cifar10_cnn's 2x2 do
    // when H and W are even).
    bool tiles = p.stride_h == p.kernel_h && p.stride_w == p.kernel_w && p.pad_h == 0 && p.pad_w == 0 &&
                 g.P * p.kernel_h == g.H && g.Q * p.kernel_w == g.W;
    if (!tiles) LOUPE_CUDA_CHECK(cudaMemsetAsync(gx.data_ptr(), 0, gx.nbytes(), stream));
    cuda::dispatch_float(x.dtype(), "pooling backward", [&](auto tag) {
      using T = decltype(tag);
      cuda::launch(max_bwd_disjoint<T>, cuda::blocks_for(y.numel()), cuda::kThreads, 0, stream, gx.data<T>(),
                   x.data<T>(), y.data<T>(), gy.data<T>(), g);
    });
  } else {
    cuda::dispatch_float(x.dtype(), "pooling backward", [&](auto tag) {
      using T = decltype(tag);
      cuda::launch(max_bwd_overlap<T>, cuda::blocks_for(x.numel()), cuda::kThreads, 0, stream, gx.data<T>(),
                   x.data<T>(), y.data<T>(), gy.data<T>(), g);
    });
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

void pool_backward(const ExecContext& ctx, PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
                   const Pool2dParams& p) {
  cuda::require_float(x, "pooling backward");
  const cudaStream_t s = cuda::stream(ctx);
  if (m == PoolMode::Max) return max_backward(gx, x, y, gy, p, s);
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingBackward(cuda::cudnn(ctx), pd.d, &one, yd.d, y.data_ptr(), yd.d, gy.data_ptr(), xd.d,
                                         x.data_ptr(), &zero, xd.d, gx.data_ptr()));
}

// ---- max pooling of disjoint windows, channels-last, with its dropout ---------------------------
// One thread per output pixel and 16 bytes of channels (V = 8 halves or 4 floats): the window's
// max in float (NaN ignored, as the CPU's std::max and cuDNN's NOT_PROPAGATE_NAN do), then
// dropout's mask for those elements of the output in memory order. The backward recomputes the max
// from x and gives the gradient to the first element equal to it, row-major, as the CPU does.

template <class T>
struct alignas(16) Vec {
  static constexpr int V = 16 / sizeof(T);
  T v[V];
};

struct FusedGeometry {
  uint32_t N, C, H, W, P, Q, kh, kw;  // C: channels; kernel == stride, no padding
};

// (n, i, j, pack) of output pack q; CV = C / V packs per pixel.
__device__ __forceinline__ void split_pack(uint64_t q, uint32_t CV, const FusedGeometry& g, uint64_t& n, uint32_t& i,
                                           uint32_t& j, uint32_t& pack) {
  pack = uint32_t(q % CV);
  q /= CV;
  j = uint32_t(q % g.Q);
  q /= g.Q;
  i = uint32_t(q % g.P);
  n = q / g.P;
}

// Dropout's decision for element e of the output (one Philox call per four elements).
__device__ __forceinline__ bool keep(const PoolDropout& d, uint64_t c0, uint64_t e) {
  Philox4 r = philox(d.rng.seed, c0 + e / 4, 0);
  return uniform01(r.v[e % 4]) >= d.p;
}

// Each channel's max over output pixel (n, i, j)'s window, in float.
template <class T>
__device__ __forceinline__ void window_max(float (&m)[Vec<T>::V], const Vec<T>* x, const FusedGeometry& g, uint64_t n,
                                           uint32_t i, uint32_t j, uint32_t pack, uint32_t CV) {
#pragma unroll
  for (int v = 0; v < Vec<T>::V; ++v) m[v] = -INFINITY;
  for (uint32_t a = 0; a < g.kh; ++a)
    for (uint32_t b = 0; b < g.kw; ++b) {
      Vec<T> in = x[((n * g.H + i * g.kh + a) * g.W + j * g.kw + b) * CV + pack];
#pragma unroll
      for (int v = 0; v < Vec<T>::V; ++v) m[v] = fmaxf(m[v], cuda::to_float(in.v[v]));
    }
}

template <class T>
__global__ void max_fused_fwd(Vec<T>* y, const Vec<T>* x, FusedGeometry g, uint64_t packs, PoolDropout d) {
  constexpr int V = Vec<T>::V;
  const uint32_t CV = g.C / V;
  const float scale = 1.f / (1.f - d.p);
  const uint64_t c0 = d.on ? cuda::first_counter(d.rng) : 0;
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < packs; q += uint64_t(blockDim.x) * gridDim.x) {
    uint64_t n;
    uint32_t i, j, pack;
    split_pack(q, CV, g, n, i, j, pack);
    float m[V];
    window_max<T>(m, x, g, n, i, j, pack, CV);
    Vec<T> out;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float o = m[v];
      if (d.on) o = keep(d, c0, q * V + v) ? o * scale : 0.f;
      out.v[v] = cuda::from_float<T>(o);
    }
    y[q] = out;
  }
}

// kReluBias: x is relu's output, and the gradient goes on through the relu (only where the window's
// max is positive) and into the bias's: each thread sums its channels' gradients (its pack is
// fixed: C / V divides the block), the block adds its lanes' sums in lane order into
// partial[block * C + c], and cuda::sum_blocks adds the blocks'.
template <class T, bool kReluBias>
__global__ void max_fused_bwd(Vec<T>* gx, const Vec<T>* x, const Vec<T>* gy, FusedGeometry g, uint64_t packs,
                              PoolDropout d, float* partial) {
  constexpr int V = Vec<T>::V;
  const uint32_t CV = g.C / V;
  const float scale = 1.f / (1.f - d.p);
  const uint64_t c0 = d.on ? cuda::first_counter(d.rng) : 0;
  float acc[V] = {};
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < packs; q += uint64_t(blockDim.x) * gridDim.x) {
    uint64_t n;
    uint32_t i, j, pack;
    split_pack(q, CV, g, n, i, j, pack);
    const Vec<T> gin = gy[q];
    float m[V], grad[V];
    int first[V];
    window_max<T>(m, x, g, n, i, j, pack, CV);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      first[v] = -1;
      float gv = cuda::to_float(gin.v[v]);
      // Through dropout first, rounded as dropout's backward stores it.
      if (d.on) gv = keep(d, c0, q * V + v) ? cuda::to_float(cuda::from_float<T>(gv * scale)) : 0.f;
      if (kReluBias) {  // relu's output is positive where the max is: the gradient passes there only
        gv = m[v] > 0.f ? gv : 0.f;
        acc[v] += gv;
      }
      grad[v] = gv;
    }
    for (uint32_t a = 0; a < g.kh; ++a)
      for (uint32_t b = 0; b < g.kw; ++b) {
        const uint64_t at = ((n * g.H + i * g.kh + a) * g.W + j * g.kw + b) * CV + pack;
        const Vec<T> in = x[at];
        Vec<T> out;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          bool hit = first[v] < 0 && cuda::to_float(in.v[v]) == m[v];
          if (hit) first[v] = int(a * g.kw + b);
          out.v[v] = cuda::from_float<T>(hit ? grad[v] : 0.f);
        }
        gx[at] = out;
      }
  }
  if constexpr (kReluBias) {
    __shared__ float sums[cuda::kThreads * 8];
    const uint32_t lane = threadIdx.x / CV, pack = threadIdx.x % CV, lanes = blockDim.x / CV;
#pragma unroll
    for (int v = 0; v < V; ++v) sums[lane * g.C + pack * V + v] = acc[v];
    __syncthreads();
    for (uint32_t c = threadIdx.x; c < g.C; c += blockDim.x) {
      float t = 0.f;
      for (uint32_t l = 0; l < lanes; ++l) t += sums[l * g.C + c];
      partial[uint64_t(blockIdx.x) * g.C + c] = t;
    }
  }
}

// The fused kernels' conditions: max pooling, kernel == stride, no padding, channels-last 4-D
// tensors whose channels fill 16-byte vectors, every pointer 16-byte aligned.
bool fusable(const Tensor& x, const std::initializer_list<const void*>& ptrs, const Pool2dParams& p) {
  const int64_t vec = 16 / int64_t(x.element_size());
  return (x.dtype() == DType::f32 || x.dtype() == DType::f16 || x.dtype() == DType::bf16) &&
         x.memory_format() == MemoryFormat::ChannelsLast && x.size(1) % vec == 0 && p.kernel_h == p.stride_h &&
         p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 && x.numel() < (int64_t(1) << 40) &&
         cuda::vec4_ok(4, ptrs);
}

FusedGeometry fused_geometry(const Tensor& x, const Pool2dParams& p) {
  FusedGeometry g;
  g.N = uint32_t(x.size(0));
  g.C = uint32_t(x.size(1));
  g.H = uint32_t(x.size(2));
  g.W = uint32_t(x.size(3));
  g.kh = uint32_t(p.kernel_h);
  g.kw = uint32_t(p.kernel_w);
  g.P = g.H / g.kh;
  g.Q = g.W / g.kw;
  return g;
}

bool max_forward_fused(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Pool2dParams& p,
                       const PoolDropout& d) {
  if (!fusable(x, {x.data_ptr(), y.data_ptr()}, p) || y.memory_format() != MemoryFormat::ChannelsLast) return false;
  const cudaStream_t s = cuda::stream(ctx);
  FusedGeometry g = fused_geometry(x, p);
  bool ok = true;
  cuda::dispatch_float(x.dtype(), "max pooling", [&](auto tag) {
    using T = decltype(tag);
    const uint64_t packs = uint64_t(y.numel()) / Vec<T>::V;
    cuda::launch(max_fused_fwd<T>, cuda::blocks_for(int64_t(packs)), cuda::kThreads, 0, s,
                 static_cast<Vec<T>*>(y.data_ptr()), static_cast<const Vec<T>*>(x.data_ptr()), g, packs, d);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
  return ok;
}

// The fused backward kernels' shared start: whether they take gx, x and gy (false: nothing done);
// then the geometry, and gx zeroed where no window covers it (an odd H or W gets no gradient there).
bool backward_fits(const ExecContext& ctx, const Tensor& gx, const Tensor& x, const Tensor& gy, const Pool2dParams& p,
                   FusedGeometry& g) {
  if (!fusable(x, {x.data_ptr(), gx.data_ptr(), gy.data_ptr()}, p) || gx.memory_format() != MemoryFormat::ChannelsLast ||
      gy.memory_format() != MemoryFormat::ChannelsLast)
    return false;
  g = fused_geometry(x, p);
  if (g.P * g.kh != g.H || g.Q * g.kw != g.W)
    LOUPE_CUDA_CHECK(cudaMemsetAsync(gx.data_ptr(), 0, gx.nbytes(), cuda::stream(ctx)));
  return true;
}

bool max_backward_fused(const ExecContext& ctx, const Tensor& gx, const Tensor& x, const Tensor& gy,
                        const Pool2dParams& p, const PoolDropout& d) {
  FusedGeometry g;
  if (!backward_fits(ctx, gx, x, gy, p, g)) return false;
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(x.dtype(), "max pooling backward", [&](auto tag) {
    using T = decltype(tag);
    const uint64_t packs = uint64_t(gy.numel()) / Vec<T>::V;
    cuda::launch(max_fused_bwd<T, false>, cuda::blocks_for(int64_t(packs)), cuda::kThreads, 0, s,
                 static_cast<Vec<T>*>(gx.data_ptr()), static_cast<const Vec<T>*>(x.data_ptr()),
                 static_cast<const Vec<T>*>(gy.data_ptr()), g, packs, d, nullptr);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
  return true;
}

bool max_backward_relu_bias(const ExecContext& ctx, const Tensor& gz, const Tensor& gb, const Tensor& x,
                            const Tensor& gy, const Pool2dParams& p, const PoolDropout& d) {
  // A thread's channels stay the same across its windows only where C / V divides the block.
  const int64_t CV = x.size(1) / (16 / int64_t(x.element_size()));
  FusedGeometry g;
  if (!gb.defined() || gb.dtype() != x.dtype() || !gb.is_contiguous() || gb.numel() != x.size(1) ||
      CV > cuda::kThreads || (CV & (CV - 1)) != 0 || !backward_fits(ctx, gz, x, gy, p, g))
    return false;
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(x.dtype(), "max pooling backward", [&](auto tag) {
    using T = decltype(tag);
    const uint64_t packs = uint64_t(gy.numel()) / Vec<T>::V;
    const unsigned blocks = cuda::blocks_for(int64_t(packs));
    Tensor partial = empty(Shape{int64_t(blocks) * g.C}, DType::f32, x.device());
    cuda::launch(max_fused_bwd<T, true>, blocks, cuda::kThreads, 0, s, static_cast<Vec<T>*>(gz.data_ptr()),
                 static_cast<const Vec<T>*>(x.data_ptr()), static_cast<const Vec<T>*>(gy.data_ptr()), g, packs, d,
                 partial.data<float>());
    LOUPE_CUDA_LAUNCH_CHECK();
    cuda::launch(cuda::sum_blocks<T>, unsigned(g.C), cuda::kSumThreads, 0, s, static_cast<T*>(gb.data_ptr()),
                 partial.data<float>(), int(blocks), int64_t(g.C), int64_t(g.C), static_cast<T*>(nullptr));
  });
  LOUPE_CUDA_LAUNCH_CHECK();
  return true;
}

const PoolKernels table{pool_forward, pool_backward, max_forward_fused, max_backward_fused, max_backward_relu_bias};
const RegisterBackend<PoolKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
