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
#include <type_traits>

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
__device__ __forceinline__ void vadd(float& a, float b) { a += b; }
__device__ __forceinline__ void vadd(float2& a, float2 b) { a.x += b.x; a.y += b.y; }
__device__ __forceinline__ void vadd(float4& a, float4 b) { a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w; }
__device__ __forceinline__ bool vfinite(float a) { return isfinite(a); }
__device__ __forceinline__ bool vfinite(float2 a) { return isfinite(a.x) && isfinite(a.y); }
__device__ __forceinline__ bool vfinite(float4 a) {
  return isfinite(a.x) && isfinite(a.y) && isfinite(a.z) && isfinite(a.w);
}

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

// Each run of equal rows is cut into chunks of kChunk positions, and one warp sums a chunk (lanes
// over the columns, the positions in order). A run of one chunk (most: ids seen a few times) writes
// its row directly; a longer one (a padding id may fill a quarter of a batch) leaves partial sums
// that a block then adds in a fixed tree. The order depends only on the data, so results are
// bit-identical from run to run, and no run is summed serially however long it is.
constexpr int kChunk = 32, kWarps = 8, kCombineLanes = 16;

// The runs, found on the device (the host never reads num_runs: the step may be a CUDA graph).
// Runs past num_runs have length 0 (zeroed), hence no chunks.
struct Runs {
  int32_t *row, *start, *len;     // the run's row (V: ids that select none), first sorted slot, length
  int32_t *multi, *multi_first;   // its chunks where two or more (else 0), and its first partial-sum slot
  int32_t* multi_rank;            // how many runs of two chunks or more come before it
  int32_t* multi_list;            // those runs, in order: combine's work (chunk_sums writes it)
  int32_t* num_runs;
};

// multi[r] = the chunks of run r where two or more, else 0; is_multi[r] = (multi[r] > 0).
__global__ void chunks_kernel(int32_t* multi, int32_t* is_multi, const int32_t* run_len, int64_t R) {
  LOUPE_KERNEL_LOOP(r, R) {
    int32_t c = (run_len[r] + kChunk - 1) / kChunk;
    multi[r] = c > 1 ? c : 0;
    is_multi[r] = c > 1;
  }
}

// Where position p's gradient row starts in gy, in Vecs (EmbeddingGradRows::offset).
struct GyRows {
  int64_t Q, sP, sQ;  // in floats
  __device__ int64_t offset(int64_t p, int w) const { return (p / Q * sP + p % Q * sQ) / w; }
};

// acc += rows k0 .. k0 + B - 1 (those below cnt, in order) of a chunk, column j: lane k of the warp
// holds off, the offset of the chunk's k-th row. All B loads are issued before the first add (the
// ones past cnt re-read row cnt - 1 and are dropped), so they are in flight together.
template <int B, class Vec>
__device__ __forceinline__ void accumulate_rows(Vec& acc, const Vec* g, int64_t off, int k0, int cnt, int j) {
  Vec v[B];
#pragma unroll
  for (int t = 0; t < B; ++t) v[t] = g[__shfl_sync(0xffffffffu, off, min(k0 + t, cnt - 1)) + j];
#pragma unroll
  for (int t = 0; t < B; ++t)
    if (k0 + t < cnt) vadd(acc, v[t]);
}

// One warp sums positions [begin, begin + cnt) (cnt <= kChunk) of the sorted order into out (with
// `add`, onto what out holds). Lane k loads the k-th position once and the warp shares them by
// shuffles, so each lane has up to 32 floats of row loads in flight (the old loop had one).
// found_inf (null: no check): set to 1 when a value written is not finite.
template <class Vec>
__device__ __forceinline__ void sum_chunk(Vec* out, const Vec* g, GyRows gr, const int32_t* pos, int begin, int cnt,
                                          int EV, bool add, float* found_inf) {
  // Loads per batch: 32 floats for a full chunk, fewer for a short one (which re-reads its last
  // row up to the batch); within 64 registers a thread (4 blocks per SM) without spilling.
  constexpr int W = kWidth<Vec>, kFull = kChunk / W, kPart = W == 4 ? 4 : 8;
  const int lane = threadIdx.x;
  int64_t off = gr.offset(pos[begin + min(lane, cnt - 1)], W);
  for (int j0 = 0; j0 < EV; j0 += 32) {  // warp-uniform bounds: every lane takes part in the shuffles
    int j = j0 + lane, jr = min(j, EV - 1);  // lanes past the row read its last column, unused
    Vec acc{};
    if (cnt == kChunk) {
#pragma unroll 1  // one batch at a time: unrolled, the compiler hoists every load and spills
      for (int k0 = 0; k0 < kChunk; k0 += kFull) accumulate_rows<kFull>(acc, g, off, k0, cnt, jr);
    } else {
      for (int k0 = 0; k0 < cnt; k0 += kPart) accumulate_rows<kPart>(acc, g, off, k0, cnt, jr);
    }
    if (j >= EV) continue;
    if (add) vadd(acc, out[j]);
    out[j] = acc;
    if (found_inf && !vfinite(acc)) *found_inf = 1.f;  // every writer writes the same value
  }
}

// Grid-stride over work items, one warp each: first the runs (item r < num_runs: a run of one
// chunk is summed straight into its row of gw; a longer one is only listed for combine), then the
// chunks of the longer runs (item num_runs + s: partial-sum slot s, its run found by binary search).
// Both counts are read on the device; a run needs no search, which most items are. found_inf
// (null: none): the rows written into gw are checked (the partial sums are not: an inf or NaN in
// one makes the row's final sum, which combine checks, inf or NaN too).
template <class Vec>
__global__ void __launch_bounds__(32 * kWarps, 4) chunk_sums_kernel(float* gw, float* partial, const float* gy,
                                                                    GyRows gr, const int32_t* pos, Runs rs, int64_t R,
                                                                    int64_t E, int64_t V, bool accumulate,
                                                                    float* found_inf) {
  constexpr int W = kWidth<Vec>;
  const int EV = int(E / W);
  const int runs = *rs.num_runs;
  const int64_t slots = rs.multi_first[R - 1] + rs.multi[R - 1];
  const Vec* g = reinterpret_cast<const Vec*>(gy);
  for (int64_t i = int64_t(blockIdx.x) * kWarps + threadIdx.y; i < runs + slots; i += int64_t(gridDim.x) * kWarps) {
    if (i < runs) {
      int r = int(i);
      bool multi = rs.multi[r] > 0;
      int64_t row = rs.row[r];
      if (multi && threadIdx.x == 0) rs.multi_list[rs.multi_rank[r]] = r;
      if (multi || row >= V) continue;  // combine's, or the ids that select no row
      sum_chunk(reinterpret_cast<Vec*>(gw + row * E), g, gr, pos, rs.start[r], rs.len[r], EV, accumulate, found_inf);
      continue;
    }
    int s = int(i - runs), lo = 0, hi = runs - 1;  // the last run whose first slot is at or before s
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (rs.multi_first[mid] <= s) lo = mid;
      else hi = mid - 1;
    }
    if (rs.row[lo] >= V) continue;
    int c = s - rs.multi_first[lo], begin = rs.start[lo] + c * kChunk;
    int cnt = min(rs.start[lo] + rs.len[lo] - begin, kChunk);
    sum_chunk(reinterpret_cast<Vec*>(partial + int64_t(s) * E), g, gr, pos, begin, cnt, EV, false,
              static_cast<float*>(nullptr));
  }
}

// One block per run of two chunks or more (the list chunk_sums wrote; a grid-stride loop over it,
// its length read on the device). Thread (x, y) sums column x (and x + 32, ...) of chunks y,
// y + kCombineLanes, ... in chunk order, then the kCombineLanes sums are added in a fixed tree in
// shared memory: the order depends on the chunk count alone, and a padding id's run of thousands
// of chunks takes kCombineLanes-fold fewer dependent steps, with all of a lane's loads independent.
template <class Vec>
__global__ void __launch_bounds__(32 * kCombineLanes, 2) combine_kernel(float* gw, const float* partial, Runs rs,
                                                                     int64_t R, int64_t E, int64_t V, bool accumulate,
                                                                     float* found_inf) {
  constexpr int W = kWidth<Vec>;
  __shared__ Vec part[kCombineLanes][32];
  const int x = threadIdx.x, y = threadIdx.y;
  const int count = rs.multi_rank[R - 1] + (rs.multi[R - 1] > 0);
  const int64_t EV = E / W;
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    int r = rs.multi_list[i];
    int64_t row = rs.row[r];
    if (row >= V) continue;  // the ids that select no row: the same for the whole block
    int nc = rs.multi[r];
    const Vec* p = reinterpret_cast<const Vec*>(partial + int64_t(rs.multi_first[r]) * E);
    Vec* out = reinterpret_cast<Vec*>(gw + row * E);
    for (int64_t j0 = 0; j0 < EV; j0 += 32) {
      int64_t j = j0 + x;
      Vec acc{};
      if (j < EV) {
        constexpr int L = kCombineLanes;
        int k = y;
        for (; k + 7 * L < nc; k += 8 * L) {  // eight loads in flight, added in chunk order
          Vec v[8];
#pragma unroll
          for (int t = 0; t < 8; ++t) v[t] = p[int64_t(k + t * L) * EV + j];
#pragma unroll
          for (int t = 0; t < 8; ++t) vadd(acc, v[t]);
        }
        for (; k < nc; k += L) vadd(acc, p[int64_t(k) * EV + j]);
      }
      part[y][x] = acc;
      __syncthreads();
      for (int h = kCombineLanes / 2; h > 0; h /= 2) {
        if (y < h) vadd(part[y][x], part[y + h][x]);
        __syncthreads();
      }
      if (y == 0 && j < EV) {
        Vec v = part[0][x];
        if (accumulate) vadd(v, out[j]);
        out[j] = v;
        if (found_inf && !vfinite(v)) *found_inf = 1.f;
      }
      __syncthreads();  // part is reused by the next column group
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
void launch_forward_t(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E,
                      cudaStream_t stream) {
  int64_t V = weight.size(0);
  static_assert(sizeof(T) == 2, "8 elements per uint4");
  if (E % 8 == 0 && cuda::vec4_ok(E, {out.data_ptr(), weight.data_ptr()})) {
    cuda::launch(forward_kernel_x8<I>, cuda::blocks_for(n * E / 8), cuda::kThreads, 0, stream,
                 static_cast<uint4*>(out.data_ptr()), ids.data<I>(), static_cast<const uint4*>(weight.data_ptr()), n,
                 E / 8, V);
  } else {
    cuda::launch(forward_kernel_t<I, T>, cuda::blocks_for(n * E), cuda::kThreads, 0, stream, out.data<T>(),
                 ids.data<I>(), weight.data<T>(), n, E, V);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class I>
void launch_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E,
                              cudaStream_t stream) {
  if (weight.dtype() == DType::f16) return launch_forward_t<I, __half>(out, ids, weight, n, E, stream);
  if (weight.dtype() == DType::bf16) return launch_forward_t<I, __nv_bfloat16>(out, ids, weight, n, E, stream);
  int64_t V = weight.size(0);
  with_vec(vec_width(E, {}, {out.data_ptr(), weight.data_ptr()}), [&](auto tag) {
    using Vec = decltype(tag);
    int64_t EV = E / kWidth<Vec>;
    cuda::launch(forward_kernel<I, Vec>, cuda::blocks_for(n * EV), cuda::kThreads, 0, stream,
                 static_cast<Vec*>(out.data_ptr()), ids.data<I>(), static_cast<const Vec*>(weight.data_ptr()), n, EV,
                 V);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void embedding_forward(const ExecContext& ctx, const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n,
                       int64_t E) {
  cuda::require_float(weight, "embedding");
  const cudaStream_t s = cuda::stream(ctx);
  switch (ids.dtype()) {
    case DType::i32: launch_embedding_forward<int32_t>(out, ids, weight, n, E, s); break;
    case DType::f32: launch_embedding_forward<float>(out, ids, weight, n, E, s); break;
    case DType::f64: launch_embedding_forward<double>(out, ids, weight, n, E, s); break;
    default: LOUPE_FAIL("embedding on CUDA: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
}

template <class I>
void launch_keys(int32_t* keys, int32_t* pos, const Tensor& ids, int64_t n, int64_t V, cudaStream_t stream) {
  cuda::launch(keys_kernel<I>, cuda::blocks_for(n), cuda::kThreads, 0, stream, keys, pos, ids.data<I>(), n, V);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void embedding_backward(const ExecContext& ctx, const Tensor& gw, const Tensor& ids, const Tensor& gy,
                        const EmbeddingGradRows& rows, int64_t n, int64_t E, bool accumulate, float* found_inf) {
  LOUPE_CHECK(gw.dtype() != DType::f16 && gw.dtype() != DType::bf16, "embedding backward on CUDA is float32 only, ",
              "got a ", dtype_name(gw.dtype()), " table: keep the table float32 and cast the embedding's output");
  cuda::require_f32(gw, "embedding backward");
  cuda::require_f32(gy, "embedding backward's gradient");
  const cudaStream_t s = cuda::stream(ctx);
  if (!accumulate) LOUPE_CUDA_CHECK(cudaMemsetAsync(gw.data_ptr(), 0, gw.nbytes(), s));  // rows no id selects
  if (!accumulate) found_inf = nullptr;  // the dense gradient is checked where it is added
  int64_t V = gw.size(0);
  if (n == 0 || E == 0 || V == 0) return;
  LOUPE_CHECK(n < INT_MAX && V < INT_MAX, "embedding backward on CUDA: ", n, " ids over ", V,
              " rows is past the 32-bit sort keys");
  Device d = gw.device();
  int64_t R = std::min(n, V + 1);  // at most one run per row, plus the out-of-range ids
  // Runs longer than kChunk: at most n / (kChunk + 1) of them, with at most 2 n / kChunk chunks.
  int64_t max_partial = 2 * (n / kChunk) + 1, max_multi = n / (kChunk + 1) + 1;
  auto i32 = [&](int64_t k) { return empty(Shape{k}, DType::i32, d); };
  Tensor keys = i32(n), keys_sorted = i32(n), pos = i32(n), pos_sorted = i32(n);
  Tensor run_row = i32(R), run_start = i32(R), run_len = i32(R), num_runs = i32(1);
  Tensor multi = i32(R), multi_first = i32(R), is_multi = i32(R), multi_rank = i32(R);
  Tensor multi_list = i32(std::min(R, max_multi));
  auto p32 = [](const Tensor& t) { return t.data<int32_t>(); };
  Runs rs{p32(run_row),     p32(run_start),  p32(run_len),    p32(multi),
          p32(multi_first), p32(multi_rank), p32(multi_list), p32(num_runs)};
  int32_t *kp = p32(keys), *ksp = p32(keys_sorted), *pp = p32(pos), *psp = p32(pos_sorted);
  switch (ids.dtype()) {
    case DType::i32: launch_keys<int32_t>(kp, pp, ids, n, V, s); break;
    case DType::f32: launch_keys<float>(kp, pp, ids, n, V, s); break;
    case DType::f64: launch_keys<double>(kp, pp, ids, n, V, s); break;
    default: LOUPE_FAIL("embedding on CUDA: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
  int end_bit = 1;  // keys lie in [0, V]: sort only the bits that can differ
  while (end_bit < 31 && (int64_t(1) << end_bit) <= V) ++end_bit;
  int ni = int(n), nr = int(R);
  // The run lengths past num_runs are never written: zero them so the scans read defined values.
  LOUPE_CUDA_CHECK(cudaMemsetAsync(rs.len, 0, size_t(R) * sizeof(int32_t), s));
  size_t b_sort = 0, b_rle = 0, b_scan = 0;
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, b_rle, ksp, rs.row, rs.len, rs.num_runs, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b_scan, rs.len, rs.start, nr, s));
  size_t bytes = std::max({b_sort, b_rle, b_scan, size_t(1)});
  Tensor temp = empty(Shape{int64_t(bytes)}, DType::u8, d);  // the stream-ordered pool
  void* tp = temp.data_ptr();
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tp, b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(tp, b_rle, ksp, rs.row, rs.len, rs.num_runs, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, rs.len, rs.start, nr, s));
  cuda::launch(chunks_kernel, cuda::blocks_for(R), cuda::kThreads, 0, s, rs.multi, p32(is_multi), rs.len, R);
  LOUPE_CUDA_LAUNCH_CHECK();
  // The same size as the first scan: int32 sums over R.
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, rs.multi, rs.multi_first, nr, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tp, b_scan, p32(is_multi), rs.multi_rank, nr, s));
  Tensor partial = empty(Shape{max_partial * E}, DType::f32, d);
  GyRows gr{rows.Q, rows.sP, rows.sQ};
  int w = vec_width(E, {rows.sP, rows.sQ}, {gy.data_ptr(), gw.data_ptr(), partial.data_ptr()});
  // Grid-stride loops whose work counts only the device knows: a few waves of blocks (on an H100),
  // not one block per possible item, most of which would start only to find nothing to do.
  unsigned chunk_blocks = unsigned(std::min<int64_t>((R + max_partial + kWarps - 1) / kWarps, 2048));
  unsigned combine_blocks = unsigned(std::min<int64_t>(std::min(R, max_multi), 1024));
  with_vec(w, [&](auto tag) {
    using Vec = decltype(tag);
    cuda::launch(chunk_sums_kernel<Vec>, chunk_blocks, dim3(32, kWarps), 0, s, gw.data<float>(), partial.data<float>(),
                 gy.data<float>(), gr, psp, rs, R, E, V, accumulate, found_inf);
    LOUPE_CUDA_LAUNCH_CHECK();
    cuda::launch(combine_kernel<Vec>, combine_blocks, dim3(32, kCombineLanes), 0, s, gw.data<float>(),
                 partial.data<float>(), rs, R, E, V, accumulate, found_inf);
    LOUPE_CUDA_LAUNCH_CHECK();
  });
}

template <class I, class T>
__global__ void one_hot_kernel(T* out, const I* ids, int64_t n, int64_t C) {
  LOUPE_KERNEL_LOOP(k, n * C) {
    out[k] = cuda::from_float<T>(row_of(ids[k / C], C) == k % C ? 1.f : 0.f);
  }
}

template <class I>
void launch_one_hot(const Tensor& out, const Tensor& ids, int64_t n, int64_t C, cudaStream_t stream) {
  auto go = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    cuda::launch(one_hot_kernel<I, T>, cuda::blocks_for(n * C), cuda::kThreads, 0, stream, o, ids.data<I>(), n, C);
    LOUPE_CUDA_LAUNCH_CHECK();
  };
  switch (out.dtype()) {
    case DType::f32: go(out.data<float>()); break;
    case DType::f16: go(out.data<__half>()); break;
    case DType::bf16: go(out.data<__nv_bfloat16>()); break;
    default: LOUPE_FAIL("one_hot on CUDA cannot produce ", dtype_name(out.dtype()));
  }
}

void one_hot(const ExecContext& ctx, const Tensor& out, const Tensor& ids, int64_t n, int64_t C) {
  const cudaStream_t s = cuda::stream(ctx);
  switch (ids.dtype()) {
    case DType::i32: launch_one_hot<int32_t>(out, ids, n, C, s); break;
    case DType::f32: launch_one_hot<float>(out, ids, n, C, s); break;
    case DType::f64: launch_one_hot<double>(out, ids, n, C, s); break;
    default: LOUPE_FAIL("one_hot on CUDA: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
}

const EmbeddingKernels table{embedding_forward, embedding_backward, one_hot};
const RegisterBackend<EmbeddingKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
