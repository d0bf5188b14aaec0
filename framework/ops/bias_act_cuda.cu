// The fused epilogue on CUDA: float32, float16 and bfloat16 (stored in T, computed in float, each
// intermediate rounded to T where the separate ops store it, so both give the same bits).
// Four elements per thread (one Philox call serves the four dropout decisions, as in dropout's
// kernels) where the pointers and the layout allow, one otherwise. The backward of a [rows, C]
// layout (channels-last activations, a Linear's output) also reduces the bias gradient: each block
// sums its rows per channel in registers, then in shared memory in a fixed order, and a second
// kernel adds the blocks' partial sums in block order (deterministic: no atomics).
#include <type_traits>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/backend/channel_sums.cuh"
#include "ops/bias_act.h"

namespace loupe {
namespace {

template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

__device__ __forceinline__ float act_or_identity_fwd(int act, float v) {
  return act == int(Act::Relu)      ? fmaxf(v, 0.f)
         : act == int(Act::Sigmoid) ? 1.f / (1.f + expf(-v))
         : act == int(Act::Tanh)    ? tanhf(v)
                                    : v;
}

__device__ __forceinline__ float act_or_identity_bwd(int act, float y, float g) {
  return act == int(Act::Relu)      ? (y > 0.f ? g : 0.f)
         : act == int(Act::Sigmoid) ? g * y * (1.f - y)
         : act == int(Act::Tanh)    ? g * (1.f - y * y)
                                    : g;
}

template <class T>
__device__ __forceinline__ T round_to(float v) {
  return cuda::from_float<T>(v);
}

// Channel of element i.
__device__ __forceinline__ int64_t channel_of(int64_t i, int64_t C, int64_t inner) {
  return inner == 1 ? i % C : (i / inner) % C;
}

// The forward of four consecutive elements starting at i (i % 4 == 0), their values in v. A pack
// (`packed`: the layout lets four elements share a channel or be four channels of one row) finds
// its channels with one division, others one per element.
template <class T>
__device__ __forceinline__ void fwd4(T (&v)[4], const T* b, int64_t i, const BiasActArgs& a, float scale,
                                     uint64_t counter0, bool packed) {
  Philox4 r{};
  if (a.dropout) r = philox(a.rng.seed, counter0 + uint64_t(i / 4), 0);
  const int64_t c0 = b ? channel_of(i, a.C, a.inner) : 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float z = cuda::to_float(v[k]);
    if (b) {
      int64_t c = packed ? (a.inner == 1 ? c0 + k : c0) : channel_of(i + k, a.C, a.inner);
      z = cuda::to_float(round_to<T>(z + cuda::to_float(b[c])));
    }
    float y = cuda::to_float(round_to<T>(act_or_identity_fwd(a.act, z)));
    if (a.dropout) y = uniform01(r.v[k]) >= a.p ? y * scale : 0.f;
    v[k] = round_to<T>(y);
  }
}

template <class T>
__global__ void fwd_pack(Pack4<T>* y, const Pack4<T>* x, const T* b, int64_t n4, BiasActArgs a) {
  const float scale = 1.f / (1.f - a.p);
  const uint64_t c0 = a.dropout ? cuda::first_counter(a.rng) : 0;
  LOUPE_KERNEL_LOOP(q, n4) {
    Pack4<T> p = x[q];
    fwd4(p.v, b, q * 4, a, scale, c0, true);
    y[q] = p;
  }
}

// Any alignment: four elements a thread, the last group partial.
template <class T>
__global__ void fwd_any(T* y, const T* x, const T* b, int64_t n, BiasActArgs a) {
  const float scale = 1.f / (1.f - a.p);
  const uint64_t c0 = a.dropout ? cuda::first_counter(a.rng) : 0;
  LOUPE_KERNEL_LOOP(q, (n + 3) / 4) {
    T v[4];
    int64_t i = q * 4;
    int m = n - i < 4 ? int(n - i) : 4;
    for (int k = 0; k < 4; ++k) v[k] = k < m ? x[i + k] : round_to<T>(0.f);
    fwd4(v, b, i, a, scale, c0, false);
    for (int k = 0; k < m; ++k) y[i + k] = v[k];
  }
}

// The gradient of four consecutive elements at i from the outputs y and the incoming gy.
template <class T>
__device__ __forceinline__ void bwd4(T (&g)[4], const T (&y)[4], int64_t i, const BiasActArgs& a, float scale,
                                     uint64_t counter0) {
  Philox4 r{};
  if (a.dropout) r = philox(a.rng.seed, counter0 + uint64_t(i / 4), 0);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float yk = cuda::to_float(y[k]), gk = cuda::to_float(g[k]);
    if (a.dropout)  // relu or none: a kept output is positive exactly where relu passed
      g[k] = uniform01(r.v[k]) >= a.p && (a.act < 0 || yk > 0.f) ? round_to<T>(gk * scale) : round_to<T>(0.f);
    else
      g[k] = round_to<T>(act_or_identity_bwd(a.act, yk, gk));
  }
}

template <class T>
__global__ void bwd_pack(Pack4<T>* gx, const Pack4<T>* y, const Pack4<T>* gy, int64_t n4, BiasActArgs a) {
  const float scale = 1.f / (1.f - a.p);
  const uint64_t c0 = a.dropout ? cuda::first_counter(a.rng) : 0;
  LOUPE_KERNEL_LOOP(q, n4) {
    Pack4<T> g = gy[q];
    const Pack4<T> yv = y[q];
    bwd4(g.v, yv.v, q * 4, a, scale, c0);
    gx[q] = g;
  }
}

template <class T>
__global__ void bwd_any(T* gx, const T* y, const T* gy, int64_t n, BiasActArgs a) {
  const float scale = 1.f / (1.f - a.p);
  const uint64_t c0 = a.dropout ? cuda::first_counter(a.rng) : 0;
  LOUPE_KERNEL_LOOP(q, (n + 3) / 4) {
    T g[4], yv[4];
    int64_t i = q * 4;
    int m = n - i < 4 ? int(n - i) : 4;
    for (int k = 0; k < 4; ++k) {
      g[k] = k < m ? gy[i + k] : round_to<T>(0.f);
      yv[k] = k < m ? y[i + k] : round_to<T>(0.f);
    }
    bwd4(g, yv, i, a, scale, c0);
    for (int k = 0; k < m; ++k) gx[i + k] = g[k];
  }
}

// [rows, C] with C a power of two in [4, 1024]: thread t owns channels 4 (t % P) .. + 3 (P = C / 4
// packs a row) of rows t / P, t / P + L, ... (L = blockDim / P rows in flight) within the block's
// range; its four sums meet the other row lanes' in shared memory, added in lane order.
constexpr int kRowThreads = 256;
template <class T>
__global__ void bwd_rows(Pack4<T>* gx, float* partial, const Pack4<T>* y, const Pack4<T>* gy, int64_t rows,
                         int64_t rows_per_block, BiasActArgs a) {
  __shared__ float sums[kRowThreads * 4];
  const int P = int(a.C / 4), lane = threadIdx.x / P, pack = threadIdx.x % P, L = kRowThreads / P;
  const float scale = 1.f / (1.f - a.p);
  const uint64_t c0 = a.dropout ? cuda::first_counter(a.rng) : 0;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int64_t begin = int64_t(blockIdx.x) * rows_per_block, end = min(rows, begin + rows_per_block);
  for (int64_t r = begin + lane; r < end; r += L) {
    int64_t q = r * P + pack;
    Pack4<T> g = gy[q];
    const Pack4<T> yv = y[q];
    bwd4(g.v, yv.v, q * 4, a, scale, c0);
    gx[q] = g;
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] += cuda::to_float(g.v[k]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) sums[lane * a.C + pack * 4 + k] = acc[k];
  __syncthreads();
  for (int c = threadIdx.x; c < a.C; c += kRowThreads) {
    float t = 0.f;
    for (int l = 0; l < L; ++l) t += sums[l * a.C + c];
    partial[int64_t(blockIdx.x) * a.C + c] = t;
  }
}


template <class T>
void forward_t(const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a, cudaStream_t stream) {
  const int64_t n = x.numel();
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  // Four elements share a channel (inner % 4 == 0) or are four channels of one row (inner == 1).
  const bool packs = (a.inner % 4 == 0 || (a.inner == 1 && a.C % 4 == 0)) &&
                     cuda::vec4_ok(n, {y.data_ptr(), x.data_ptr()});
  if (packs)
    cuda::launch(fwd_pack<T>, cuda::blocks_for(n / 4), cuda::kThreads, 0, stream, static_cast<Pack4<T>*>(y.data_ptr()),
                 static_cast<const Pack4<T>*>(x.data_ptr()), bp, n / 4, a);
  else
    cuda::launch(fwd_any<T>, cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, stream, y.data<T>(), x.data<T>(), bp, n,
                 a);
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class T>
void backward_t(const Tensor& gx, const Tensor& gb, const Tensor& y, const Tensor& gy, const BiasActArgs& a,
                cudaStream_t stream) {
  const int64_t n = y.numel();
  const bool packs = cuda::vec4_ok(n, {gx.data_ptr(), y.data_ptr(), gy.data_ptr()});
  if (gb.defined() && !packs && cuda::vec4_ok(n, {gx.data_ptr(), y.data_ptr()})) {
    // The incoming gradient is a view at an unaligned offset (the caller chose the fused bias
    // gradient from the shape alone): read a fresh, aligned copy of it instead.
    Tensor aligned = empty_like(gy);
    copy_(aligned, gy);
    return backward_t<T>(gx, gb, y, aligned, a, stream);
  }
  if (gb.defined()) {
    LOUPE_CHECK(bias_act_fuses_bias_grad(a.C, a.inner) && packs, "bias_act backward: no fused bias gradient for C ",
                a.C, ", inner ", a.inner);
    const int64_t rows = a.outer, L = kRowThreads / (a.C / 4);
    // About four blocks an SM, each at least 8 rows a lane (fewer, longer blocks for few rows:
    // fewer partial sums to add up).
    int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(4 * 132, (rows + 8 * L - 1) / (8 * L)));
    int64_t per = (rows + blocks - 1) / blocks;
    blocks = (rows + per - 1) / per;
    Tensor partial = empty(Shape{blocks * a.C}, DType::f32, y.device());
    cuda::launch(bwd_rows<T>, unsigned(blocks), kRowThreads, 0, stream, static_cast<Pack4<T>*>(gx.data_ptr()),
                 partial.data<float>(), static_cast<const Pack4<T>*>(y.data_ptr()),
                 static_cast<const Pack4<T>*>(gy.data_ptr()), rows, per, a);
    LOUPE_CUDA_LAUNCH_CHECK();
    cuda::launch(cuda::sum_blocks<T>, unsigned(a.C), cuda::kSumThreads, 0, stream, gb.data<T>(), partial.data<float>(), int(blocks),
                 a.C, a.C, static_cast<T*>(nullptr));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (packs)
    cuda::launch(bwd_pack<T>, cuda::blocks_for(n / 4), cuda::kThreads, 0, stream, static_cast<Pack4<T>*>(gx.data_ptr()),
                 static_cast<const Pack4<T>*>(y.data_ptr()), static_cast<const Pack4<T>*>(gy.data_ptr()), n / 4, a);
  else
    cuda::launch(bwd_any<T>, cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, stream, gx.data<T>(), y.data<T>(),
                 gy.data<T>(), n, a);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bias_act_forward(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  cuda::require_float(x, "bias_act");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(x.dtype(), "bias_act", [&](auto tag) { forward_t<decltype(tag)>(y, x, b, a, s); });
}

void bias_act_backward(const ExecContext& ctx, const Tensor& gx, const Tensor& gb, const Tensor& y, const Tensor& gy,
                       const BiasActArgs& a) {
  cuda::require_float(y, "bias_act backward");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(y.dtype(), "bias_act backward",
                       [&](auto tag) { backward_t<decltype(tag)>(gx, gb, y, gy, a, s); });
}

const BiasActKernels table{bias_act_forward, bias_act_backward};
const RegisterBackend<BiasActKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
