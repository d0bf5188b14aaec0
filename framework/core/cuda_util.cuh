// Shared by the .cu files: checked CUDA/cuBLAS calls (file:line, the call, the status string and a
// hint), the compute stream and cuBLAS handle, and launch helpers.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/exec_context.h"
#include "core/random.h"
#include "core/tensor.h"

struct cudnnContext;  // cudnnHandle_t is cudnnContext*; core does not include cuDNN

namespace loupe::cuda {

[[noreturn]] void fail_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line);

// The one stream all loupe work is ordered on, and the cuBLAS handle bound to it: the runtime's
// own (copies, allocations, synchronisation, graph capture) and the default lane's. Kernels take
// theirs from the context their table hands them: stream(ctx), cublas(ctx).
cudaStream_t stream();
cublasHandle_t cublas();

}  // namespace loupe::cuda

namespace loupe {
// A stream and the library handles bound to it (core/exec_context.h).
struct ExecLane {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // with a workspace of its own: no allocation inside a capture
  // cuBLASLt's handle (ops/linalg_cuda.cu's GEMMs with epilogues), which shares cuBLAS's workspace:
  // both run on this lane's stream, one after the other.
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudnnContext* cudnn = nullptr;    // made at the lane's first cuDNN call (ops/backend/cudnn_util.cu)
  std::once_flag cudnn_once;
};
}  // namespace loupe

namespace loupe::cuda {

// The runtime's lane: its compute stream and handles (a context's null lane).
ExecLane& default_lane();
// A lane of its own: a non-blocking stream, a cuBLAS handle bound to it with its own workspace.
// It lives until the process ends.
ExecLane* new_lane();
inline ExecLane& lane(const ExecContext& c) { return c.lane ? *c.lane : default_lane(); }
// Defined beside stream() and cublas() (core/cuda_runtime.cu): a name lives in one file (docs/design.md).
cudaStream_t stream(const ExecContext& c);
cublasHandle_t cublas(const ExecContext& c);

// The SMs that the gradient all-reduce of data parallelism holds while backward runs beside it:
// NCCL's 24 collective channels between NVLink-4 GPUs unless CudaRuntime::set_comm_sms said
// otherwise (core/cuda_runtime.h).
int comm_sms();

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 65535LL * 32 ? (b > 0 ? b : 1) : 65535LL * 32);  // grid-stride loops cover the rest
}

// Kernels that are float32 only.
inline void require_f32(const Tensor& t, const char* op) {
  if (t.dtype() != DType::f32)
    LOUPE_FAIL(op, " on CUDA supports float32 only for now, got ", dtype_name(t.dtype()),
               " (float64 runs on the CPU: --device cpu)");
}

// Kernels with float32, float16 and bfloat16 paths (mixed precision: storage in T, arithmetic in
// float).
inline void require_float(const Tensor& t, const char* op) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f16 && t.dtype() != DType::bf16)
    LOUPE_FAIL(op, " on CUDA supports float32, float16 and bfloat16, got ", dtype_name(t.dtype()),
               " (float64 runs on the CPU: --device cpu)");
}

// Calls f with a value of the storage type of t (float, __half or __nv_bfloat16).
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: LOUPE_FAIL(op, " on CUDA supports float32, float16 and bfloat16, got ", dtype_name(t));
  }
}

// A random draw's first Philox counter (core/random.h): inside a captured CUDA graph its offset is
// relative to the device word base, which every replay advances.
__device__ __forceinline__ uint64_t first_counter(const RngDraw& r) { return r.offset + (r.base ? *r.base : 0); }

// Loads and stores through float, whatever the storage type.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Max and sum over the warp; every lane gets the result.
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.f;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// float4 loads and stores are possible when every pointer is 16-byte aligned and n is a multiple
// of 4 (views at an odd offset are not). Memory-bound kernels move about twice the bytes per
// instruction that way.
inline bool vec4_ok(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % 4 != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Two same-shaped strided views, passed by value to a kernel: the offsets of element i of each.
struct StridedPair {
  int nd = 0;
  int64_t shape[kMaxDims], st0[kMaxDims], st1[kMaxDims];
  StridedPair(const Shape& s, const Shape& a, const Shape& b) : nd(s.size()) {
    for (int d = 0; d < nd; ++d) {
      shape[d] = s[d];
      st0[d] = a[d];
      st1[d] = b[d];
    }
  }
  __device__ void offsets(int64_t i, int64_t& o0, int64_t& o1) const {
    o0 = o1 = 0;
    for (int d = nd - 1; d >= 0; --d) {
      int64_t idx = i % shape[d];
      i /= shape[d];
      o0 += idx * st0[d];
      o1 += idx * st1[d];
    }
  }
};

}  // namespace loupe::cuda

#define LOUPE_CUDA_CHECK(call)                                                               \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) ::loupe::cuda::fail_cuda(e_, #call, __FILE__, __LINE__);          \
  } while (0)

#define LOUPE_CUBLAS_CHECK(call)                                                             \
  do {                                                                                       \
    cublasStatus_t s_ = (call);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::loupe::cuda::fail_cublas(s_, #call, __FILE__, __LINE__); \
  } while (0)

// After a launch: catches bad configurations at once (cheap: no synchronisation).
#define LOUPE_CUDA_LAUNCH_CHECK() LOUPE_CUDA_CHECK(cudaGetLastError())

// for (i in [0, n)) over a grid-stride loop.
#define LOUPE_KERNEL_LOOP(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

namespace loupe::cuda {

// A launch's configuration for cudaLaunchKernelEx and the occupancy queries, its attribute in
// `attrs`: thread-block clusters of `cluster` blocks along x (0: none).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t s, unsigned cluster,
                                        cudaLaunchAttribute (&attrs)[1]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attrs;
  if (cluster) {
    cudaLaunchAttribute& a = attrs[cfg.numAttrs++] = cudaLaunchAttribute{};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = cluster;
    a.val.clusterDim.y = a.val.clusterDim.z = 1;
  }
  return cfg;
}

// kernel<<<grid, block, smem, s>>>(args...): the arguments convert to the kernel's parameter types
// as in a <<<>>> launch. Checked at once.
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  cudaLaunchAttribute attrs[1];
  const cudaLaunchConfig_t cfg = launch_config(grid, block, smem, s, 0, attrs);
  LOUPE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

// As launch, in thread-block clusters of `cluster` blocks along x (grid.x a multiple of it;
// compute capability 9.0 or newer): the blocks of a cluster run at once, on one GPC, and may read
// each other's shared memory.
template <class... P, class... A>
void launch_clustered(void (*kernel)(P...), unsigned cluster, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                      A&&... args) {
  cudaLaunchAttribute attrs[1];
  const cudaLaunchConfig_t cfg = launch_config(grid, block, smem, s, cluster, attrs);
  LOUPE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

}  // namespace loupe::cuda
