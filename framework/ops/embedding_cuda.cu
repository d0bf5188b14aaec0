// Embedding on CUDA. Forward: a gather, one thread per output element (or float4). Backward:
// deterministic, without atomics: sort (row, position) pairs by row (a stable radix sort, so each
// row's positions stay in order), find the runs of equal rows, and let one block sum each run in
// a fixed order. Ids that are not integers in [0, V) give a zero row and no gradient: checking
// them would mean waiting for the device (the CPU path and the dataset builders check).
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

template <class I>
__global__ void forward_kernel(float* out, const I* ids, const float* w, int64_t n, int64_t E, int64_t V) {
  LOUPE_KERNEL_LOOP(k, n * E) {
    int64_t i = k / E, j = k - i * E;
    int64_t r = row_of(ids[i], V);
    out[k] = r >= 0 ? w[r * E + j] : 0.f;
  }
}

// E4 = E / 4 float4s per row (E % 4 == 0, both buffers 16-byte aligned).
template <class I>
__global__ void forward_kernel4(float4* out, const I* ids, const float4* w, int64_t n, int64_t E4, int64_t V) {
  LOUPE_KERNEL_LOOP(k, n * E4) {
    int64_t i = k / E4, j = k - i * E4;
    int64_t r = row_of(ids[i], V);
    out[k] = r >= 0 ? w[r * E4 + j] : make_float4(0.f, 0.f, 0.f, 0.f);
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

// One block per run of equal rows. threadIdx.x walks the columns; threadIdx.y splits the run's
// positions into kGroups strided subsets (long runs, such as a padding id, would otherwise be
// summed by one thread), each summed in position order and then added in group order. The order
// depends only on the data, so results are bit-identical from run to run.
constexpr int kLanes = 32, kGroups = 8;
__global__ void runs_kernel(float* gw, const float* gy, const int32_t* pos, const int32_t* run_row,
                            const int32_t* run_start, const int32_t* run_len, const int32_t* num_runs, int64_t E,
                            int64_t V) {
  __shared__ float part[kGroups][kLanes];
  int runs = *num_runs;
  for (int r = blockIdx.x; r < runs; r += gridDim.x) {
    int64_t row = run_row[r];
    if (row >= V) continue;  // the out-of-range ids; the same for the whole block
    const int32_t* p = pos + run_start[r];
    int len = run_len[r];
    for (int64_t j0 = 0; j0 < E; j0 += kLanes) {
      int64_t j = j0 + threadIdx.x;
      float acc = 0.f;
      if (j < E)
        for (int k = threadIdx.y; k < len; k += kGroups) acc += gy[int64_t(p[k]) * E + j];
      part[threadIdx.y][threadIdx.x] = acc;
      __syncthreads();
      if (threadIdx.y == 0 && j < E) {
        float t = part[0][threadIdx.x];
        for (int y = 1; y < kGroups; ++y) t += part[y][threadIdx.x];
        gw[row * E + j] = t;
      }
      __syncthreads();
    }
  }
}

template <class I>
void launch_forward(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  int64_t V = weight.size(0);
  if (E % 4 == 0 && cuda::vec4_ok(E, {out.data_ptr(), weight.data_ptr()})) {
    forward_kernel4<I><<<cuda::blocks_for(n * E / 4), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<float4*>(out.data_ptr()), ids.data<I>(), static_cast<const float4*>(weight.data_ptr()), n, E / 4,
        V);
  } else {
    forward_kernel<I><<<cuda::blocks_for(n * E), cuda::kThreads, 0, cuda::stream()>>>(
        out.data<float>(), ids.data<I>(), weight.data<float>(), n, E, V);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

void forward(const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  cuda::require_f32(weight, "embedding");
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

void backward(const Tensor& gw, const Tensor& ids, const Tensor& gy, int64_t n, int64_t E) {
  cuda::require_f32(gw, "embedding backward");
  cudaStream_t s = cuda::stream();
  LOUPE_CUDA_CHECK(cudaMemsetAsync(gw.data_ptr(), 0, gw.nbytes(), s));  // rows no id selects
  int64_t V = gw.size(0);
  if (n == 0 || E == 0 || V == 0) return;
  LOUPE_CHECK(n < INT_MAX && V < INT_MAX, "embedding backward on CUDA: ", n, " ids over ", V,
              " rows is past the 32-bit sort keys");
  Device d = gw.device();
  int64_t R = std::min(n, V + 1);  // at most one run per row, plus the out-of-range ids
  auto i32 = [&](int64_t k) { return empty(Shape{k}, DType::i32, d); };
  Tensor keys = i32(n), keys_sorted = i32(n), pos = i32(n), pos_sorted = i32(n);
  Tensor run_row = i32(R), run_start = i32(R), run_len = i32(R), num_runs = i32(1);
  int32_t *kp = keys.data<int32_t>(), *ksp = keys_sorted.data<int32_t>();
  int32_t *pp = pos.data<int32_t>(), *psp = pos_sorted.data<int32_t>();
  int32_t *rowp = run_row.data<int32_t>(), *startp = run_start.data<int32_t>(), *lenp = run_len.data<int32_t>();
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
  // The run lengths past num_runs are never written: zero them so the scan reads defined values.
  LOUPE_CUDA_CHECK(cudaMemsetAsync(lenp, 0, size_t(R) * sizeof(int32_t), s));
  size_t b_sort = 0, b_rle = 0, b_scan = 0;
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, b_rle, ksp, rowp, lenp, nrp, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b_scan, lenp, startp, nr, s));
  size_t bytes = std::max({b_sort, b_rle, b_scan, size_t(1)});
  Tensor temp = empty(Shape{int64_t(bytes)}, DType::u8, d);  // the stream-ordered pool
  LOUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), b_sort, kp, ksp, pp, psp, ni, 0, end_bit, s));
  LOUPE_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.data_ptr(), b_rle, ksp, rowp, lenp, nrp, ni, s));
  LOUPE_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data_ptr(), b_scan, lenp, startp, nr, s));
  unsigned blocks = unsigned(std::min<int64_t>(R, 65535));
  runs_kernel<<<blocks, dim3(kLanes, kGroups), 0, s>>>(gw.data<float>(), gy.data<float>(), psp, rowp, startp, lenp,
                                                        nrp, E, V);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const EmbeddingKernels table{forward, backward};
const RegisterBackend<EmbeddingKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
