// Embedding on CUDA. Forward: a gather, one thread per output element (or per float2 or float4 where
// the rows allow; for a float16 or bfloat16 table, the same copy in that type, eight elements per
// 16-byte load). Backward (float32): deterministic, without atomics: sort (row, position) pairs by
// row (a stable radix sort, so each row's positions stay in order), find the runs of equal rows,
// and sum each run in chunks in a fixed order (below). The gradient rows are read where they lie
// (EmbeddingGradRows), so an expanded gradient is never copied out. Ids that are not integers in
// [0, V) give a zero row and no gradient: checking them would mean waiting for the device (the CPU
// path and the dataset builders check).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <climits>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/embedding.h"

namespace loupe {
namespace {

// The row id v selects, or -1 when it selects none.
__device__ __forceinline__ int64_t row_of(int32_t v, int64_t V) { return v >= 0 && v < V ? v : -1; }
template <class F>
__device__ __forceinline__ int64_t row_of(F v, int64_t V) {
  return v >= F(0) && v < F(V) && F(int64_t(v)) == v ? int64_t(v) : -1;  // in range, then integral
}

// W floats moved as one Vec (float, float2 or float4): rows of E floats read and written whole.
template <class Vec>
constexpr int kWidth = int(sizeof(Vec) / sizeof(float));

// The widest of float4, float2 and float that rows of E floats allow: E and every stride (in
// floats) a multiple of it, every pointer aligned to it.
int vec_width(int64_t E, std::initializer_list<int64_t> strides, std::initializer_list<const void*> ptrs) {
  for (int w : {4, 2}) {
    bool ok = E % w == 0;
    for (int64_t st : strides) ok = ok && st % w == 0;
    for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % (sizeof(float) * w) == 0;
    if (ok) return w;
  }
  return 1;
}

// Calls f with a Vec of width w.
template <class F>
void with_vec(int w, F&& f) {
  if (w == 4) f(float4{});
  else if (w == 2) f(float2{});
  else f(float{});
}

// EV = E / W Vecs per row.
template <class I, class Vec>
__global__ void forward_kernel(Vec* out, const I* ids, const Vec* w, int64_t n, int64_t EV, int64_t V) {
  LOUPE_KERNEL_LOOP(k, n * EV) {
    int64_t i = k / EV, j = k - i * EV;
    int64_t r = row_of(ids[i], V);
    out[k] = r >= 0 ? w[r * EV + j] : Vec{};
  }
}

// Sort keys: the row of each position, or V (sorted last, then skipped) for an id that selects none.
template <class I>
__global__ void keys_kernel(int32_t* keys, int32_t* pos, const I* ids, int64_t n, int64_t V) {
  LOUPE_KERNEL_LOOP(i, n) {
    int64_t r = row_of(ids[i], V);
    keys[i] = int32_t(r >= 0 ? r : V);
    pos[i] = int32_t(i);
  }
}

// Each run of equal rows is cut into chunks of kChunk positions. One warp sums a chunk (lanes over
// the columns, the positions in order); a run of one chunk writes its row directly, a longer one
// (a padding id may fill half a batch) leaves partial sums that a second pass adds in chunk order.
// The order depends only on the data, so results are bit-identical from run to run, and no run is
// summed serially by one block however long it is.
constexpr int kChunk = 32, kWarps = 8;

// chunks[r] = chunks of run r; multi[r] = the same for runs of two chunks or more, else 0 (they
// own partial-sum slots). Runs past num_runs have length 0 (zeroed), hence no chunks.
__global__ void chunks_kernel(int32_t* chunks, int32_t* multi, const int32_t* run_len, int64_t R) {
  LOUPE_KERNEL_LOOP(r, R) {
    int32_t c = (run_len[r] + kChunk - 1) / kChunk;
    chunks[r] = c;
    multi[r] = c > 1 ? c : 0;
  }
}

// Where position p's gradient row starts in gy, in units of w floats (EmbeddingGradRows::offset).
struct GyRows {
  int64_t Q, sP, sQ;  // in floats
  __device__ int64_t offset(int64_t p, int w) const { return (p / Q * sP + p % Q * sQ) / w; }
};

// One warp per chunk slot q < max_chunks (an upper bound: slots past the real total exit).
__global__ void chunk_sums_kernel(float* gw, float* partial, const float* gy, GyRows gr, const int32_t* pos,
                                  const int32_t* run_row, const int32_t* run_start, const int32_t* run_len,
                                  const int32_t* chunks, const int32_t* chunk_first, const int32_t* multi_first,
                                  const int32_t* num_runs, int64_t max_chunks, int64_t E, int64_t V, bool accumulate) {
  int64_t q = int64_t(blockIdx.x) * kWarps + threadIdx.y;
  int runs = *num_runs;
  if (q >= max_chunks || runs == 0) return;
  int lo = 0, hi = runs - 1;  // the last run whose first chunk is at or before q
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (chunk_first[mid] <= q) lo = mid;
    else hi = mid - 1;
  }
  int c = int(q - chunk_first[lo]);
  if (c >= chunks[lo] || run_row[lo] >= V) return;  // past the last chunk, or the out-of-range ids
  int64_t row = run_row[lo];
  int begin = run_start[lo] + c * kChunk, end = min(run_start[lo] + run_len[lo], begin + kChunk);
  const bool direct = chunks[lo] == 1;
  float* out = direct ? gw + row * E : partial + int64_t(multi_first[lo] + c) * E;
  for (int64_t j = threadIdx.x; j < E; j += 32) {
    float acc = 0.f;
    for (int k = begin; k < end; ++k) acc += gy[gr.offset(pos[k], 1) + j];
    if (direct && accumulate) out[j] += acc;
    else out[j] = acc;
  }
}

// One warp per run of two chunks or more: its partial sums, in chunk order.
__global__ void combine_kernel(float* gw, const float* partial, const int32_t* run_row, const int32_t* multi,
                               const int32_t* multi_first, const int32_t* num_runs, int64_t E, int64_t V,
                               bool accumulate) {
  int runs = *num_runs;
  for (int r = blockIdx.x * kWarps + threadIdx.y; r < runs; r += gridDim.x * kWarps) {
    if (multi[r] == 0 || run_row[r] >= V) continue;
    const float* p = partial + int64_t(multi_first[r]) * E;
    int64_t row = run_row[r];
    for (int64_t j = threadIdx.x; j < E; j += 32) {
      float acc = 0.f;
      for (int c = 0; c < multi[r]; ++c) acc += p[int64_t(c) * E + j];
      if (accumulate) gw[row * E + j] += acc;
      else gw[row * E + j] = acc;
    }
  }
}

// Float16 / bfloat16 tables: a copy of T, one element per thread.
template <class I, class T>
__global__ void forward_kernel_t(T* out, const I* ids, const T* w, int64_t n, int64_t E, int64_t V) {
  LOUPE_KERNEL_LOOP(k, n * E) {
    int64_t i = k / E, j = k - i * E;
    int64_t r = row_of(ids[i], V);
    out[k] = r >= 0 ? w[r * E + j] : cuda::from_float<T>(0.f);
  }
}

// Eight 2-byte elements per uint4 (E % 8 == 0, both buffers 16-byte aligned): E8 = E / 8 per row.
template <class I>
__global__ void forward_kernel_x8(uint4* out, const I* ids, const uint4* w, int64_t n, int64_t E8, int64_t V) {
  LOUPE_KERNEL_LOOP(k, n * E8) {
    int64_t i = k / E8, j = k - i * E8;
    int64_t r = row_of(ids[i], V);
    out[k] = r >= 0 ? w[r * E8 + j] : make_uint4(0u, 0u, 0u, 0u);  // zero bits: +0 in float16 and bfloat16
  }
}

template <class I, class T>
void launch_forward_t(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  int64_t V = weight.size(0);
  static_assert(sizeof(T) == 2, "8 elements per uint4");
  if (E % 8 == 0 && cuda::vec4_ok(E, {out.data_ptr(), weight.data_ptr()})) {
    forward_kernel_x8<I><<<cuda::blocks_for(n * E / 8), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<uint4*>(out.data_ptr()), ids.data<I>(), static_cast<const uint4*>(weight.data_ptr()), n, E / 8,
        V);
  } else {
    forward_kernel_t<I, T><<<cuda::blocks_for(n * E), cuda::kThreads, 0, cuda::stream()>>>(
        out.data<T>(), ids.data<I>(), weight.data<T>(), n, E, V);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class I>
void launch_forward(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  if (weight.dtype() == DType::f16) return launch_forward_t<I, __half>(out, ids, weight, n, E);
  if (weight.dtype() == DType::bf16) return launch_forward_t<I, __nv_bfloat16>(out, ids, weight, n, E);
  int64_t V = weight.size(0);
  with_vec(vec_width(E, {}, {out.data_ptr(), weight.data_ptr()}), [&](auto tag) {
    using Vec = decltype(tag);
    int64_t EV = E / kWidth<Vec>;
    forward_kernel<I, Vec><<<cuda::blocks_for(n * EV), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<Vec*>(out.data_ptr()), ids.data<I>(), static_cast<const Vec*>(weight.data_ptr()), n, EV, V);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void forward(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  cuda::require_float(weight, "embedding");
  switch (ids.dtype()) {
    case DType::i32: launch_forward<int32_t>(out, ids, weight, n, E); break;
    case DType::f32: launch_forward<float>(out, ids, weight, n, E); break;
    case DType::f64: launch_forward<double>(out, ids, weight, n, E); break;
    default: LOUPE_FAIL("embedding on CUDA: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
}

template <class I>
void launch_keys(int32_t* keys, int32_t* pos, const Tensor& ids, int64_t n, int64_t V) {
  keys_kernel<I><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(keys, pos, ids.data<I>(), n, V);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void backward(const Tensor& gw, const Tensor& ids, const Tensor& gy, const EmbeddingGradRows& rows, int64_t n,
              int64_t E, bool accumulate) {
  LOUPE_CHECK(gw.dtype() != DType::f16 && gw.dtype() != DType::bf16, "embedding backward on CUDA is float32 only, ",
              "got a ", dtype_name(gw.dtype()), " table: keep the table float32 and cast the embedding's output");
  cuda::require_f32(gw, "embedding backward");
  cuda::require_f32(gy, "embedding backward's gradient");
  cudaStream_t s = cuda::stream();
  if (!accumulate) LOUPE_CUDA_CHECK(cudaMemsetAsync(gw.data_ptr(), 0, gw.nbytes(), s));  // rows no id selects
  int64_t V = gw.size(0);
  if (n == 0 || E == 0 || V == 0) return;
  LOUPE_CHECK(n < INT_MAX && V < INT_MAX, "embedding backward on CUDA: ", n, " ids over ", V,
              " rows is past the 32-bit sort keys");
  Device d = gw.device();
  int64_t R = std::min(n, V + 1);  // at most one run per row, plus the out-of-range ids
  // Chunks: at most one partial chunk per run plus n / kChunk full ones; those of multi-chunk runs
  // (each longer than kChunk) at most 2 n / kChunk.
  int64_t max_chunks = R + n / kChunk, max_partial = 2 * (n / kChunk) + 1;
  auto i32 = [&](int64_t k) { return empty(Shape{k}, DType::i32, d); };
  Tensor keys = i32(n), keys_sorted = i32(n), pos = i32(n), pos_sorted = i32(n);
  Tensor run_row = i32(R), run_start = i32(R), run_len = i32(R), num_runs = i32(1);
  Tensor chunks = i32(R), chunk_first = i32(R), multi = i32(R), multi_first = i32(R);
  int32_t *kp = keys.data<int32_t>(), *ksp = keys_sorted.data<int32_t>();
  int32_t *pp = pos.data<int32_t>(), *psp = pos_sorted.data<int32_t>();
  int32_t *rowp = run_row.data<int32_t>(), *startp = run_start.data<int32_t>(), *lenp = run_len.data<int32_t>();
  int32_t *chp = chunks.data<int32_t>(), *chfp = chunk_first.data<int32_t>();
  int32_t *mp = multi.data<int32_t>(), *mfp = multi_first.data<int32_t>();
  int32_t* nrp = num_runs.data<int32_t>();
  switch (ids.dtype()) {
    case DType::i32: launch_keys<int32_t>(kp, pp, ids, n, V); break;
    case DType::f32: launch_keys<float>(kp, pp, ids, n, V); break;
    case DType::f64: launch_keys<double>(kp, pp, ids, n, V); break;
    default: LOUPE_FAIL("embedding on CUDA: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
  int end_bit = 1;  // keys lie in [0, V]: sort only the bits that can differ
  while (end_bit < 31 && (int64_t(1) << end_bit) <= V) ++end_bit;
  int ni = int(n), nr = int(R);
  // The run lengths past num_runs are never written: zero them so the scans read defined values.
  LOUPE_CUDA_CHECK(cudaMemsetAsync(lenp, 0, size_t(R) * sizeof(int32_t), s));
  size_t b_sort = 0, b_rle = 0, b_scan = 0;
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, b_rle, ksp, rowp, lenp, nrp, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b_scan, lenp, startp, nr, s));
  size_t bytes = std::max({b_sort, b_rle, b_scan, size_t(1)});
  Tensor temp = empty(Shape{int64_t(bytes)}, DType::u8, d);  // the stream-ordered pool
  void* tp = temp.data_ptr();
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tp, b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(tp, b_rle, ksp, rowp, lenp, nrp, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, lenp, startp, nr, s));
  chunks_kernel<<<cuda::blocks_for(R), cuda::kThreads, 0, s>>>(chp, mp, lenp, R);
  LOUPE_CUDA_LAUNCH_CHECK();
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, chp, chfp, nr, s));  // same size as above
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, mp, mfp, nr, s));
  Tensor partial = empty(Shape{max_partial * E}, DType::f32, d);
  dim3 block(32, kWarps);
  LOUPE_CHECK((max_chunks + kWarps - 1) / kWarps < INT_MAX, "embedding backward on CUDA: too many ids");
  unsigned chunk_blocks = unsigned((max_chunks + kWarps - 1) / kWarps);
  GyRows gr{rows.Q, rows.sP, rows.sQ};
  chunk_sums_kernel<<<chunk_blocks, block, 0, s>>>(gw.data<float>(), partial.data<float>(), gy.data<float>(), gr, psp,
                                                   rowp, startp, lenp, chp, chfp, mfp, nrp, max_chunks, E, V,
                                                   accumulate);
  LOUPE_CUDA_LAUNCH_CHECK();
  unsigned combine_blocks = unsigned(std::min<int64_t>((R + kWarps - 1) / kWarps, 4096));
  combine_kernel<<<combine_blocks, block, 0, s>>>(gw.data<float>(), partial.data<float>(), rowp, mp, mfp, nrp, E, V,
                                                  accumulate);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const EmbeddingKernels table{forward, backward};
const RegisterBackend<EmbeddingKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
