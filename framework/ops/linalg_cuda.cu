#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/exec_context.h"
#include "core/gpu_timer.h"
#include "core/knobs.h"
#include "ops/linalg.h"

namespace loupe {
namespace {

// cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so we pass B first and swap M and N; no data moves.
// cuBLAS's math mode follows --precision: TF32 tensor ops for float32 GEMMs only with tf32. The
// mode does not affect float16/bfloat16 GEMMs, which use tensor cores in every mode. The mode is
// each lane's handle's own, so it is read from the handle (a host-side getter) rather than cached.
void set_math_mode(cublasHandle_t h, Precision p) {
  cublasMath_t want = p == Precision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH, current{};
  LOUPE_CUBLAS_CHECK(cublasGetMathMode(h, &current));
  if (want != current) LOUPE_CUBLAS_CHECK(cublasSetMathMode(h, want));
}

// float16 and bfloat16 (mixed precision): 16-bit A, B and C, float32 accumulation and float
// alpha/beta (CUBLAS_COMPUTE_32F); cuBLAS runs these on tensor cores in its default math mode.
void gemm_16bit(cublasHandle_t h, const GemmArgs& g, cublasOperation_t opA, cublasOperation_t opB) {
  cudaDataType t = g.dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  float alpha = float(g.alpha), beta = float(g.beta);
  LOUPE_CUBLAS_CHECK(cublasGemmEx(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha, g.B, t, int(g.ldb),
                                  g.A, t, int(g.lda), &beta, g.C, t, int(g.ldc), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

void gemm_cublas(const ExecContext& ctx, const GemmArgs& g) {
  const cublasHandle_t h = cuda::cublas(ctx);
  set_math_mode(h, ctx.precision);
  cublasOperation_t opA = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.dtype == DType::f32) {
    float alpha = float(g.alpha), beta = float(g.beta);
    LOUPE_CUBLAS_CHECK(cublasSgemm(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const float*>(g.B), int(g.ldb), static_cast<const float*>(g.A),
                                   int(g.lda), &beta, static_cast<float*>(g.C), int(g.ldc)));
  } else if (g.dtype == DType::f64) {
    double alpha = g.alpha, beta = g.beta;
    LOUPE_CUBLAS_CHECK(cublasDgemm(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const double*>(g.B), int(g.ldb), static_cast<const double*>(g.A),
                                   int(g.lda), &beta, static_cast<double*>(g.C), int(g.ldc)));
  } else if (g.dtype == DType::f16 || g.dtype == DType::bf16) {
    gemm_16bit(h, g, opA, opB);
  } else {
    LOUPE_FAIL("matmul on CUDA supports float32, float64, float16 and bfloat16, got ", dtype_name(g.dtype));
  }
}

// ---- cuBLASLt: the Linear layer's GEMMs with the bias in the epilogue (ops/linalg.h) ------------
// Column-major, as cuBLAS: a row-major [r, c] matrix is a column-major [c, r] one.
//   forward:  y^T [out, rows] = w [out, in] (w^T [in, out] stored, op T) x^T [in, rows] (op N) + bias,
//             the bias along D's rows (EPILOGUE_BIAS);
//   backward: gw^T [in, out] = x^T [in, rows] (op N) gy [rows, out] (gy^T [out, rows] stored, op T),
//             the bias gradient the sums over k (rows) of B = gy, one per column of D (BGRADB).
// A plan per case: the descriptors and the heuristic's candidates, the fastest of them timed on the
// case's own operands at its first call (as cuDNN's algorithms are, ops/conv_cuda.cu): the
// heuristic's first choice for the skinny GEMMs of a dense head (N = 10) can be slower than
// cuBLAS's own; a first call inside a graph capture, where nothing can be timed, keeps the first.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  cublasLtMatmulAlgo_t algo{};
  bool decided = false;
};
// backward, data type, compute type, rows, in, out, the operands' common alignment in bytes
using LtKey = std::tuple<bool, int, int, int64_t, int64_t, int64_t, unsigned>;

unsigned alignment_of(std::initializer_list<const void*> ps) {
  unsigned al = 256;
  for (const void* p : ps)
    while (al > 1 && reinterpret_cast<uintptr_t>(p) % al) al /= 2;
  return al;
}

cublasLtMatrixLayout_t lt_layout(cudaDataType t, int64_t r, int64_t c) {
  cublasLtMatrixLayout_t l = nullptr;
  LOUPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, uint64_t(r), uint64_t(c), r));
  return l;
}

LtPlan lt_plan(const ExecLane& lane, const LtKey& key, cudaDataType t, cublasComputeType_t ct) {
  const bool backward = std::get<0>(key);
  const int64_t rows = std::get<3>(key), in = std::get<4>(key), out = std::get<5>(key);
  const uint32_t align = std::get<6>(key);
  LtPlan p;
  LOUPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, ct, CUDA_R_32F));
  cublasOperation_t ta = backward ? CUBLAS_OP_N : CUBLAS_OP_T, tb = backward ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epi = backward ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BIAS;
  LOUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LOUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LOUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  int32_t bias_type = int32_t(t);
  LOUPE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  if (backward) {
    p.a = lt_layout(t, in, rows), p.b = lt_layout(t, out, rows), p.d = lt_layout(t, in, out);
  } else {
    p.a = lt_layout(t, in, out), p.b = lt_layout(t, in, rows), p.d = lt_layout(t, out, rows);
  }
  cublasLtMatmulPreference_t pref = nullptr;
  LOUPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = lane.workspace_bytes;
  LOUPE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    LOUPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align));
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t r[kCandidates]{};
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lane.lt, p.desc, p.a, p.b, p.d, p.d, pref, kCandidates, r, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) LOUPE_CUBLAS_CHECK(st);
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found; ++i)
    if (r[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(r[i].algo);
  return p;
}

cublasStatus_t lt_run(const ExecLane& lane, const LtPlan& p, const cublasLtMatmulAlgo_t& algo, const void* A,
                      const void* B, void* D) {
  const float alpha = 1, beta = 0;
  return cublasLtMatmul(lane.lt, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d, &algo, lane.workspace,
                        lane.workspace_bytes, lane.stream);
}

// Ten calls in a row behind a hold (core/gpu_timer.h): a cublasLtMatmul call costs the host a
// few microseconds, as much as a small GEMM runs, so events around single calls time the host.
template <class Run>
float time_launches(cudaStream_t s, Run run) {
  return cuda::time_on_gpu(s, 10, 400000, run);
}

// The GEMM of the case without the bias (cuBLAS's, as matmul runs it): the unfused path's product.
GemmArgs plain_gemm(const BiasGemmArgs& g, bool backward) {
  GemmArgs p;
  p.dtype = g.dtype;
  p.C = g.d;
  if (backward) {  // gw [out, in] = gy^T [out, rows] x [rows, in]
    p.M = g.out, p.N = g.in, p.K = g.rows, p.ta = true, p.A = g.b, p.lda = g.out, p.B = g.a, p.ldb = g.in;
    p.ldc = g.in;
  } else {  // y [rows, out] = x [rows, in] w^T [in, out]
    p.M = g.rows, p.N = g.out, p.K = g.in, p.A = g.a, p.lda = g.in, p.tb = true, p.B = g.b, p.ldb = g.in;
    p.ldc = g.out;
  }
  return p;
}

// Decides the plan at its first call. Each candidate and cuBLAS's plain GEMM are timed on these
// operands (the outputs are overwritten by the call that follows); the fastest candidate is kept
// if it beats the plain GEMM plus a microsecond, about what the bias's own kernel costs in a graph
// besides the product (its launch, ramp and boundary); else none is (the caller adds the bias its
// own way). Inside a graph capture, where nothing can be timed, the heuristic's first is kept.
// LOUPE_GEMM_EPILOGUE=on keeps the heuristic's first without timing, =off none.
void decide(const ExecContext& ctx, const BiasGemmArgs& g, bool backward, LtPlan& p, const void* A, const void* B) {
  p.decided = true;
  static const std::string mode = knobs::choice("LOUPE_GEMM_EPILOGUE").value_or("auto");
  if (mode == "off") return p.candidates.clear();
  const ExecLane& lane = cuda::lane(ctx);
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  LOUPE_CUDA_CHECK(cudaStreamIsCapturing(lane.stream, &cs));
  if (cs != cudaStreamCaptureStatusNone || mode == "on") {
    if (!p.candidates.empty()) p.candidates.resize(1), p.algo = p.candidates.front();
    return;
  }
  const GemmArgs plain = plain_gemm(g, backward);
  const float plain_us = time_launches(lane.stream, [&] { return gemm_cublas(ctx, plain), true; });
  float best = 1e30f;
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    const float us = time_launches(lane.stream, [&] { return lt_run(lane, p, algo, A, B, g.d) == CUBLAS_STATUS_SUCCESS; });
    if (us >= 0 && us < best) best = us, p.algo = algo;
  }
  if (!(best < plain_us + 1.0f)) p.candidates.clear();
}

bool lt_gemm(const ExecContext& ctx, const BiasGemmArgs& g, bool backward) {
  cudaDataType t;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  switch (g.dtype) {
    case DType::f16: t = CUDA_R_16F; break;
    case DType::bf16: t = CUDA_R_16BF; break;
    case DType::f32:
      t = CUDA_R_32F;
      if (ctx.precision == Precision::TF32) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    default: return false;
  }
  ExecLane& lane = cuda::lane(ctx);
  const LtKey key{backward, int(t), int(ct), g.rows, g.in, g.out, alignment_of({g.a, g.b, g.d, g.bias})};
  static std::mutex mu;  // the plans, and each plan's descriptor (its bias pointer is set per call)
  static std::map<LtKey, LtPlan> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, lt_plan(lane, key, t, ct)).first;
  LtPlan& p = it->second;
  if (p.decided && p.candidates.empty()) return false;
  LOUPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
  // The forward's A is the weight, the backward's the input (see above).
  const void* A = backward ? g.a : g.b;
  const void* B = backward ? g.b : g.a;
  if (!p.decided) decide(ctx, g, backward, p, A, B);
  if (p.candidates.empty()) return false;
  cublasStatus_t st = lt_run(lane, p, p.algo, A, B, g.d);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // nothing launched: the caller does the bias its own way
    p.candidates.clear();
    return false;
  }
  LOUPE_CUBLAS_CHECK(st);
  return true;
}

bool linear_bias(const ExecContext& ctx, const BiasGemmArgs& g) { return lt_gemm(ctx, g, false); }
bool weight_grad_bias(const ExecContext& ctx, const BiasGemmArgs& g) { return lt_gemm(ctx, g, true); }

// A classifier head's backward (out <= 16) in two launches instead of two GEMMs and a sum: products
// this narrow use little of the GPU on cuBLAS (mnist_mlp's fc3 backward was its step's largest
// row: lab/benchmarks.md, "A classifier head's backward in two launches"). The first launch
// computes gx = gy w, one element a thread, and beside it each 32 rows' share of gw = gy^T x and of
// gb, 64 columns a block; the second adds the shares in row order, so every run gives the same bits.
using cuda::from_float;
using cuda::to_float;
constexpr int kNarrowRows = int(kNarrowShareRows), kNarrowCols = 64;
constexpr int kNarrowLanes = cuda::kThreads / (kNarrowCols / 2);  // row lanes: a warp each

template <class T, int NP>  // NP: out rounded up to 4, 8 or 16
__global__ void narrow_shares_kernel(NarrowBackwardArgs g, int64_t share_blocks, int64_t tiles) {
  const int N = int(g.out);
  const int64_t R = g.rows, K = g.in;
  const T* gy = static_cast<const T*>(g.gy);
  if (int64_t(blockIdx.x) >= share_blocks) {  // gx, one element a thread
    const int64_t i = (int64_t(blockIdx.x) - share_blocks) * blockDim.x + threadIdx.x;
    if (i >= R * K) return;
    const int64_t r = i / K, k = i % K;
    const T* w = static_cast<const T*>(g.w);
    float s = 0.f;
    for (int n = 0; n < N; ++n) s += to_float(gy[r * N + n]) * to_float(w[n * K + k]);
    static_cast<T*>(g.gx)[i] = from_float<T>(s);
    return;
  }
  __shared__ float sgy[kNarrowRows][NP];
  __shared__ float red[kNarrowLanes][NP][kNarrowCols];
  const int64_t chunk = int64_t(blockIdx.x) / tiles, tile = int64_t(blockIdx.x) % tiles, r0 = chunk * kNarrowRows;
  const int rows = int(min(int64_t(kNarrowRows), R - r0));
  for (int i = threadIdx.x; i < kNarrowRows * NP; i += blockDim.x) {
    const int r = i / NP, n = i % NP;
    sgy[r][n] = r < rows && n < N ? to_float(gy[(r0 + r) * N + n]) : 0.f;
  }
  __syncthreads();
  // The shares of element i (gw's N x K, then gb's N) sit together: work[i * chunks + chunk].
  const int64_t chunks = (R + kNarrowRows - 1) / kNarrowRows;
  float* work = g.work + chunk;
  if (tile == 0 && int(threadIdx.x) < N) {
    float s = 0.f;
    for (int r = 0; r < rows; ++r) s += sgy[r][threadIdx.x];
    work[(N * K + threadIdx.x) * chunks] = s;
  }
  if (!g.gw) return;  // the same for the whole block
  const int pair = threadIdx.x % (kNarrowCols / 2), lane = threadIdx.x / (kNarrowCols / 2);
  const int64_t k0 = tile * kNarrowCols + 2 * pair;
  const T* x = static_cast<const T*>(g.x);
  float acc0[NP] = {}, acc1[NP] = {};
  for (int r = lane; r < rows; r += kNarrowLanes) {
    const T* xr = x + (r0 + r) * K;
    const float x0 = k0 < K ? to_float(xr[k0]) : 0.f, x1 = k0 + 1 < K ? to_float(xr[k0 + 1]) : 0.f;
#pragma unroll
    for (int n = 0; n < NP; ++n) acc0[n] += sgy[r][n] * x0, acc1[n] += sgy[r][n] * x1;
  }
#pragma unroll
  for (int n = 0; n < NP; ++n) red[lane][n][2 * pair] = acc0[n], red[lane][n][2 * pair + 1] = acc1[n];
  __syncthreads();
  for (int i = threadIdx.x; i < N * kNarrowCols; i += blockDim.x) {
    const int n = i / kNarrowCols, c = i % kNarrowCols;
    const int64_t k = tile * kNarrowCols + c;
    if (k >= K) continue;
    float s = 0.f;
    for (int l = 0; l < kNarrowLanes; ++l) s += red[l][n][c];
    work[(n * K + k) * chunks] = s;
  }
}

// gw and gb, a warp an element: lane l adds the shares of chunks l, l + 32, ... (one coalesced read
// each), then the warp adds its lanes in a fixed tree, so every run gives the same bits. (A thread an
// element, reading its shares one after another, lost to cuBLAS at 1024 rows: lab/benchmarks.md,
// "A classifier head's backward in two launches".)
template <class T>
__global__ void narrow_sums_kernel(NarrowBackwardArgs g, int64_t chunks) {
  const int64_t N = g.out, K = g.in, per = N * (K + 1);
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;  // the same for the warp
  if (i >= per) return;
  const bool bias = i >= N * K;
  if (bias ? !g.gb : !g.gw) return;
  const int lane = int(threadIdx.x % 32);
  float s = 0.f;
  for (int64_t c = lane; c < chunks; c += 32) s += g.work[i * chunks + c];
  s = cuda::warp_sum(s);
  if (lane != 0) return;
  if (bias) static_cast<T*>(g.gb)[i - N * K] = from_float<T>(s);
  else static_cast<T*>(g.gw)[i] = from_float<T>(s);
}

bool narrow_backward(const ExecContext& ctx, const NarrowBackwardArgs& g) {
  if (!narrow_backward_fits(g.rows, g.in, g.out) || !g.work ||
      (g.dtype != DType::f32 && g.dtype != DType::f16 && g.dtype != DType::bf16))
    return false;
  const cudaStream_t s = cuda::stream(ctx);
  const int64_t chunks = (g.rows + kNarrowRows - 1) / kNarrowRows, tiles = (g.in + kNarrowCols - 1) / kNarrowCols;
  const int64_t share_blocks = g.gw || g.gb ? chunks * tiles : 0;
  const int64_t gx_blocks = g.gx ? (g.rows * g.in + cuda::kThreads - 1) / cuda::kThreads : 0;
  if (share_blocks + gx_blocks == 0) return true;
  cuda::dispatch_float(g.dtype, "narrow_backward", [&](auto tv) {
    using T = decltype(tv);
    auto shares = g.out <= 4 ? narrow_shares_kernel<T, 4> : g.out <= 8 ? narrow_shares_kernel<T, 8>
                                                                       : narrow_shares_kernel<T, 16>;
    cuda::launch(shares, unsigned(share_blocks + gx_blocks), cuda::kThreads, 0, s, g, share_blocks, tiles);
    LOUPE_CUDA_LAUNCH_CHECK();
    if (share_blocks) {
      const int64_t per = g.out * (g.in + 1);
      cuda::launch(narrow_sums_kernel<T>, unsigned((per * 32 + cuda::kThreads - 1) / cuda::kThreads), cuda::kThreads, 0,
                   s, g, chunks);
      LOUPE_CUDA_LAUNCH_CHECK();
    }
  });
  return true;
}

const LinalgKernels table{gemm_cublas, linear_bias, weight_grad_bias, narrow_backward};
const RegisterBackend<LinalgKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
