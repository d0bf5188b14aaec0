// Losses and the correct count, each summed over the batch on the device (no read-back inside a
// step). Rows of several classes go one warp a row, lanes over the classes, eight rows a block (a
// thread a row was slow on char_lstm's 57 classes: lab/benchmarks.md, "The step as one CUDA graph,
// and fewer kernels"), and every sum is taken in a fixed order: the same run after run.
#include <algorithm>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/loss.h"

namespace loupe {
namespace {

constexpr int kBlock = 512;

using cuda::warp_max;
using cuda::warp_sum;

using cuda::from_float;
using cuda::to_float;

// log sum exp of row x, by the calling warp. Logits of cross-entropy and the count may be 16-bit
// (a mixed-precision model's last layer): read as float, the arithmetic is float32's, so a 16-bit
// row gives the bits its float32 cast would.
template <class T>
__device__ __forceinline__ float warp_lse(const T* x, int64_t C) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) m = fmaxf(m, to_float(x[c]));
  m = warp_max(m);
  float z = 0.f;
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) z += expf(to_float(x[c]) - m);
  return logf(warp_sum(z)) + m;
}

// A row's loss (or correct flag) per warp, a block's rows summed in warp order into partial[block];
// then one block adds the partials in block order. Two small launches that spread the rows over
// the GPU: one block walking a large batch's rows alone was slow (lab/benchmarks.md, "The step as
// one CUDA graph, and fewer kernels").
constexpr int kRowWarps = 8, kSumThreads = 256;

// The trailing barrier lets a kernel call it again (its shared array is one).
__device__ __forceinline__ void block_partial(float* partial, float acc) {
  __shared__ float per_warp[kRowWarps];
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < kRowWarps; ++w) t += per_warp[w];
    partial[blockIdx.x] = t;
  }
  __syncthreads();
}

// out = scale * the sum of partial[0..n), in a fixed order.
// accumulate: out += the sum (a running count inside a graphed step: no add kernel after it).
// The sum of partial[0..n) in a fixed order, in thread 0 (kSumThreads threads; callable again).
__device__ float fixed_sum(const float* partial, int64_t n) {
  __shared__ float s[kSumThreads];
  float t = 0.f;
  for (int64_t k = threadIdx.x; k < n; k += kSumThreads) t += partial[k];
  s[threadIdx.x] = t;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  const float total = s[0];
  __syncthreads();
  return total;
}

__global__ void sum_partials(float* out, const float* partial, int64_t n, float scale, bool accumulate) {
  const float t = fixed_sum(partial, n);
  if (threadIdx.x == 0) *out = accumulate ? *out + t * scale : t * scale;
}

// A row's loss from its log sum exp. An out-of-range label cannot throw here; it makes the loss
// NaN, which the epoch report shows.
template <class T>
__device__ __forceinline__ float row_loss(const T* xr, int32_t label, int64_t C, float lse) {
  return (label >= 0 && label < C) ? lse - to_float(xr[label]) : NAN;
}

template <class T>
__global__ void ce_rows(float* partial, const T* x, const int32_t* y, int64_t N, int64_t C) {
  const int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  float acc = 0.f;
  if (r < N) {
    int32_t label = y[r];
    float lse = warp_lse(x + r * C, C);
    acc = row_loss(x + r * C, label, C, lse);
  }
  block_partial(partial, acc);
}

// One warp a row.
// gx in the logits' type: the float32 value rounded once, as a cast of a float32 gradient would.
template <class T>
__global__ void ce_bwd(T* gx, const T* x, const int32_t* y, const float* gloss, int64_t N, int64_t C) {
  const float scale = *gloss / float(N);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < N; r += warps) {
    const T* xr = x + r * C;
    float lse = warp_lse(xr, C);
    for (int64_t c = threadIdx.x % 32; c < C; c += 32)
      gx[r * C + c] = from_float<T>((expf(to_float(xr[c]) - lse) - (c == y[r] ? 1.f : 0.f)) * scale);
  }
}

__global__ void bce_fwd(float* loss, const float* x, const float* t, int64_t n) {
  float acc = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += fmaxf(x[i], 0.f) - x[i] * t[i] + log1pf(expf(-fabsf(x[i])));
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *loss = n ? acc / float(n) : 0.f;
}

__global__ void bce_bwd(float* gx, const float* x, const float* t, const float* gloss, int64_t n) {
  float scale = *gloss / float(n);
  LOUPE_KERNEL_LOOP(i, n) gx[i] = (1.f / (1.f + expf(-x[i])) - t[i]) * scale;
}

__global__ void correct_binary(float* out, const float* x, const float* labels, int64_t N, bool accumulate) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) acc += (x[r] > 0.f) == (labels[r] > 0.5f) ? 1.f : 0.f;
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *out = accumulate ? *out + acc : acc;
}

// Whether the calling warp's row is classified correctly: the first index of its largest value
// (a NaN never wins) is the label.
template <class T>
__device__ __forceinline__ bool warp_correct(const T* xr, int64_t C, int32_t label) {
  float best = -INFINITY;
  int64_t at = C;  // none yet
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) {
    const float v = to_float(xr[c]);
    if (v > best || (at == C && !isnan(v))) best = v, at = c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float b = __shfl_xor_sync(0xffffffffu, best, o);
    int64_t a = __shfl_xor_sync(0xffffffffu, at, o);
    if (b > best || (b == best && a < at)) best = b, at = a;
  }
  return at == label;  // every lane holds the same answer
}

// Classes: one warp a row.
template <class T>
__global__ void correct_rows(float* partial, const T* x, const int32_t* labels, int64_t N, int64_t C) {
  const int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  float acc = 0.f;
  if (r < N) acc = warp_correct(x + r * C, C, labels[r]) ? 1.f : 0.f;  // lane 0's counts
  block_partial(partial, acc);
}

// cross_entropy_counted's rows: ce_rows's loss partials in partial[0..blocks), correct_rows's
// counts in partial[blocks..2 blocks), from one read of each row; with gx, also ce_bwd's gradient
// for the incoming gradient *seed (the same arithmetic, the same bits).
template <class T>
__global__ void ce_counted_rows(float* partial, T* gx, const float* seed, const T* x, const int32_t* y, int64_t N,
                                int64_t C) {
  const int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  float loss = 0.f, hit = 0.f;
  if (r < N) {
    const T* xr = x + r * C;
    const int32_t label = y[r];
    const float lse = warp_lse(xr, C);
    loss = row_loss(xr, label, C, lse);
    hit = warp_correct(xr, C, label) ? 1.f : 0.f;
    if (gx) {
      const float scale = *seed / float(N);
      for (int64_t c = threadIdx.x % 32; c < C; c += 32)
        gx[r * C + c] = from_float<T>((expf(to_float(xr[c]) - lse) - (c == label ? 1.f : 0.f)) * scale);
    }
  }
  block_partial(partial, loss);
  block_partial(partial + gridDim.x, hit);
}

// The loss (its partials' sum over N, as sum_partials gives it), then the running sums.
__global__ void ce_counted_sums(float* loss, float* loss_sum, float* correct, const float* partial, int64_t blocks,
                                float inv_n, float weight) {
  const float l = fixed_sum(partial, blocks) * inv_n;
  const float hits = fixed_sum(partial + blocks, blocks);
  if (threadIdx.x == 0) {
    *loss = l;
    *loss_sum += weight * l;
    *correct += hits;
  }
}

// The per-warp rows, then their sum (a float32 scalar) into out, scaled.
template <class K, class... A>
void rows_then_sum(K kernel, const Tensor& out, int64_t N, float scale, bool accumulate, cudaStream_t stream,
                   A... args) {
  const int64_t blocks = std::max<int64_t>(1, (N + kRowWarps - 1) / kRowWarps);
  Tensor partial = empty(Shape{blocks}, DType::f32, out.device());
  cuda::launch(kernel, unsigned(blocks), kRowWarps * 32, 0, stream, partial.data<float>(), args...);
  LOUPE_CUDA_LAUNCH_CHECK();
  cuda::launch(sum_partials, 1, kSumThreads, 0, stream, out.data<float>(), partial.data<float>(), blocks, scale,
               accumulate);
}

void ce_forward(const ExecContext& ctx, const Tensor& loss, const Tensor& logits, const Tensor& labels, int64_t N,
                int64_t C) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    rows_then_sum(ce_rows<T>, loss, N, N ? 1.f / float(N) : 0.f, false, s, logits.data<T>(), labels.data<int32_t>(),
                  N, C);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void ce_backward(const ExecContext& ctx, const Tensor& gx, const Tensor& logits, const Tensor& labels,
                 const Tensor& gloss, int64_t N, int64_t C) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(ce_bwd<T>, cuda::blocks_for(N * 32), cuda::kThreads, 0, s, gx.data<T>(), logits.data<T>(),
                 labels.data<int32_t>(), gloss.data<float>(), N, C);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bce_forward(const ExecContext& ctx, const Tensor& loss, const Tensor& logits, const Tensor& targets, int64_t n) {
  cuda::require_f32(logits, "binary_cross_entropy_with_logits");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::launch(bce_fwd, 1, kBlock, 0, s, loss.data<float>(), logits.data<float>(), targets.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bce_backward(const ExecContext& ctx, const Tensor& gx, const Tensor& logits, const Tensor& targets,
                  const Tensor& gloss, int64_t n) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::launch(bce_bwd, cuda::blocks_for(n), cuda::kThreads, 0, s, gx.data<float>(), logits.data<float>(),
               targets.data<float>(), gloss.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void count_correct(const ExecContext& ctx, const Tensor& out, const Tensor& logits, const Tensor& labels, int64_t N,
                   int64_t C, bool accumulate) {
  const cudaStream_t s = cuda::stream(ctx);
  if (C == 1) {
    cuda::require_f32(logits, "count_correct of binary outputs");
    cuda::launch(correct_binary, 1, kBlock, 0, s, out.data<float>(), logits.data<float>(), labels.data<float>(), N,
                 accumulate);
  } else {
    cuda::dispatch_float(logits.dtype(), "count_correct", [&](auto tag) {
      using T = decltype(tag);
      rows_then_sum(correct_rows<T>, out, N, 1.f, accumulate, s, logits.data<T>(), labels.data<int32_t>(), N, C);
    });
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

void ce_forward_counted(const ExecContext& ctx, const Tensor& loss, const Tensor& loss_sum, const Tensor& correct,
                        const Tensor& gx, const Tensor& seed, const Tensor& logits, const Tensor& labels, int64_t N,
                        int64_t C, float weight) {
  const cudaStream_t s = cuda::stream(ctx);
  const int64_t blocks = std::max<int64_t>(1, (N + kRowWarps - 1) / kRowWarps);
  Tensor partial = empty(Shape{2 * blocks}, DType::f32, loss.device());
  cuda::dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(ce_counted_rows<T>, unsigned(blocks), kRowWarps * 32, 0, s, partial.data<float>(),
                 gx.defined() ? gx.data<T>() : nullptr, gx.defined() ? seed.data<float>() : nullptr, logits.data<T>(),
                 labels.data<int32_t>(), N, C);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
  cuda::launch(ce_counted_sums, 1, kSumThreads, 0, s, loss.data<float>(), loss_sum.data<float>(), correct.data<float>(),
               partial.data<float>(), blocks, N ? 1.f / float(N) : 0.f, weight);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const LossKernels table{ce_forward, ce_backward, bce_forward, bce_backward, count_correct, ce_forward_counted};
const RegisterBackend<LossKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
