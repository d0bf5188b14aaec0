// cuDNN convolution. For each distinct problem (shapes, stride, padding, memory format and
// precision) the forward, backward-data and backward-filter kernels are chosen once by timing the
// candidates, as PyTorch's cudnn.benchmark does, then cached: a step only looks the plan up.
// The plans are cuDNN backend-API execution plans: a legacy cudnnConvolution* call costs enough host
// time in cuDNN 9 to make the step launch-bound at batch 128 (dev/bench_host, docs/profiling.md);
// executing a finalized plan costs a fraction of that. The legacy API remains the fallback where no
// backend plan can be built. Workspaces come from loupe's stream-ordered pool.
// NCHW tensors take NCHW filters; channels-last (NHWC) tensors take KRSC filters, the layout of
// cuDNN's tensor-core kernels, which then need no transposes.
// Data types: x, w and y (and their gradients) all float32, all float16 or all bfloat16; the
// 16-bit ones accumulate in float32 (compute type CUDNN_DATA_FLOAT) on tensor cores.
//
// One exception: bfloat16 channels-last convolutions whose filter holds at most 16 values (C*R*S:
// a 3x3 first layer over 1 channel) run as im2col + one cuBLAS GEMM each way (the data gradient,
// rarely needed there, stays cuDNN's). cuDNN 9.14 has tensor-core kernels for such shapes in
// float16 but not in bfloat16, where mnist_cnn's 1-channel first convolution was far slower than
// in float16; an im2col row of 16 values and GEMMs with K = 16 are what tensor cores take (bf16
// then nearly matched fp16: lab/benchmarks.md, "The step as one CUDA graph, and fewer kernels",
// item 7). Not for float16, whose cuDNN kernels are as fast, nor for cifar10_cnn's 27 values (3
// channels), where it gained nothing. LOUPE_CONV_GEMM=0 turns this off.
//
// And a first layer (its input needs no gradient; a 3x3 filter over 1-4 channels) with a bias
// and relu or no activation takes its filter's and bias's gradients in one pass of loupe's own
// over the output's gradient, where that timed faster than bias_act's backward followed by the
// filter gradient. Both kernels live in ops/conv_direct_cuda.cu.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "core/gpu_timer.h"
#include "core/knobs.h"
#include "core/precision.h"
#include "ops/conv.h"
#include "ops/backend/conv_direct.h"
#include "ops/backend/cudnn_util.cuh"
#include "ops/bias_act.h"
#include "ops/linalg.h"

namespace loupe {
namespace {

using conv_direct::FirstLayer;
using conv_direct::first_layer_fits;
using conv_direct::first_layer_run;
using conv_direct::nhwc;
using conv_direct::small_filter;
using conv_direct::forward_gemm;
using conv_direct::filter_gemm;

// A workspace cap keeps algorithm choice from claiming most of the GPU.
constexpr size_t kMaxWorkspace = size_t(512) << 20;


// ---- the backend API ------------------------------------------------------------------------------
namespace be {

struct Desc {  // an owned cudnnBackendDescriptor_t
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t t) { LOUPE_CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d)); }
  Desc(Desc&& o) noexcept : d(o.d) { o.d = nullptr; }
  Desc(const Desc&) = delete;
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const T* v) {
    LOUPE_CUDNN_CHECK(cudnnBackendSetAttribute(d, a, t, n, v));
    return *this;
  }
  Desc& ref(cudnnBackendAttributeName_t a, const Desc& o) { return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o.d); }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d); }
};

// Deprecated in recent cuDNN 9 releases (the handle moves to execution) but required by older
// ones such as 9.14: set by value so the headers' deprecation does not fire.
const auto kGraphHandle = cudnnBackendAttributeName_t(800);  // CUDNN_ATTR_OPERATIONGRAPH_HANDLE
const auto kPlanHandle = cudnnBackendAttributeName_t(400);   // CUDNN_ATTR_EXECUTION_PLAN_HANDLE

constexpr int64_t kAlignment = 16;  // bytes; every pointer is checked against it at execution

// t's descriptor; a virtual one (an intermediate of a fused graph, never in memory) is float32.
Desc tensor(const Tensor& t, int64_t uid, bool is_virtual = false) {
  int64_t dims[4], strides[4];
  for (int i = 0; i < 4; ++i) {
    dims[i] = t.size(i);
    strides[i] = t.strides()[i];
  }
  cudnnDataType_t dt = is_virtual ? CUDNN_DATA_FLOAT : cuda::cudnn_dtype(t.dtype(), "conv2d");
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  LOUPE_CUDNN_CHECK(d.finalize());
  return d;
}

// New (so aligned) storage for a tensor of t's shape, dtype and strides; its values are not set.
Tensor fresh_like(const Tensor& t) {
  int64_t span = 1;
  for (int i = 0; i < 4; ++i) span += (t.size(i) - 1) * t.strides()[i];
  return as_strided(empty(Shape{span}, t.dtype(), t.device()), t.shape(), t.strides(), 0);
}

enum class Op { Fwd, BwdData, BwdFilter };
constexpr int64_t kX = 'x', kW = 'w', kY = 'y', kB = 'b', kConv = 'c', kSum = 's';

// A finalized execution plan for one operation, or none (plan == nullptr) where cuDNN has none.
struct BePlan {
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
  float ms = 0;  // its measured GPU time
};

// Times a plan on the stream h runs on: the median of three runs after one warm-up, in milliseconds.
float time_plan(cudnnHandle_t h, Desc& plan, Desc& pack) {
  cudaStream_t s = nullptr;
  LOUPE_CUDNN_CHECK(cudnnGetStream(h, &s));
  cudaEvent_t a, b;
  LOUPE_CUDA_CHECK(cudaEventCreate(&a));
  LOUPE_CUDA_CHECK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int i = 0; i < 4; ++i) {
    LOUPE_CUDA_CHECK(cudaEventRecord(a, s));
    cudnnStatus_t st = cudnnBackendExecute(h, plan.d, pack.d);
    LOUPE_CUDA_CHECK(cudaEventRecord(b, s));
    LOUPE_CUDA_CHECK(cudaEventSynchronize(b));
    if (st != CUDNN_STATUS_SUCCESS) {
      best = -1;
      break;
    }
    float ms = 0;
    LOUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i > 0) best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

// The pointers of one execution: uids[i] names ptrs[i] (x, w, y, and the bias of a fused forward).
struct Pointers {
  int64_t uids[4];
  void* ptrs[4];
  int n = 0;
  void add(int64_t uid, void* p) {
    uids[n] = uid;
    ptrs[n++] = p;
  }
};

Desc variant_pack(const Pointers& p, void* ws) {
  Desc d(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  d.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, p.n, p.ptrs)
      .set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, p.n, p.uids)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  LOUPE_CUDNN_CHECK(d.finalize());
  return d;
}

// Candidates for an operation graph: the first few of heuristics mode A (ranked by expected
// speed; building and timing each costs start-up time), or the fallback list where mode A has none.
std::vector<Desc> candidates(const Desc& graph) {
  std::vector<Desc> cfgs;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (!cfgs.empty()) break;
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.ref(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph).set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
    if (heur.finalize() != CUDNN_STATUS_SUCCESS) continue;
    constexpr int kMax = 6;
    std::vector<Desc> got;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int i = 0; i < kMax; ++i) {
      got.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(got.back().d);
    }
    int64_t n = 0;
    if (cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, kMax, &n,
                                 raw.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    for (int64_t i = 0; i < n && i < kMax; ++i) cfgs.push_back(std::move(got[size_t(i)]));
  }
  return cfgs;
}

// Whether an engine keeps the precision: no tensor-core engine for float32 data unless tf32, and
// for 16-bit data none that down-converts the inputs further (as PyTorch does).
bool keeps_precision(const Desc& engine, DType dtype, Precision precision) {
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t nn = 0;
  cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                           CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn, notes);
  bool tensor_core = false, down_convert = false;
  for (int64_t i = 0; i < nn; ++i) {
    tensor_core |= notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    down_convert |= notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
  }
  if (dtype == DType::f32) return !tensor_core || precision == Precision::TF32;  // fp32 stays IEEE fp32
  return !down_convert;
}

// The fastest of the candidates that finalize, keep the precision and fit the workspace cap, timed
// on scratch buffers of the real sizes (outputs are overwritten, inputs left as they are), on h's stream.
// operands: each uid with a tensor of its shape, dtype and strides (4-D; x's first).
BePlan fastest(cudnnHandle_t h, std::vector<Desc> cfgs, const std::vector<std::pair<int64_t, Tensor>>& operands,
               size_t max_ws, Precision precision) {
  std::vector<Tensor> scratch;
  Pointers ptrs;
  for (const auto& [uid, t] : operands) {
    scratch.push_back(fresh_like(t));
    ptrs.add(uid, scratch.back().data_ptr());
  }
  const Tensor& x = operands.front().second;
  BePlan best;
  float best_ms = 1e30f;
  for (Desc& cfg : cfgs) {
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t ne = 0;
    if (cudnnBackendGetAttribute(cfg.d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ne, &engine.d) !=
        CUDNN_STATUS_SUCCESS)
      continue;
    if (!keeps_precision(engine, x.dtype(), precision)) continue;
    auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->ref(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg).set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &h);
    if (plan->finalize() != CUDNN_STATUS_SUCCESS) continue;
    int64_t ws = 0, nw = 0;
    if (cudnnBackendGetAttribute(plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &nw, &ws) !=
            CUDNN_STATUS_SUCCESS ||
        size_t(ws) > max_ws)
      continue;
    Tensor work = empty(Shape{std::max<int64_t>(ws, 1)}, DType::u8, x.device());
    Desc pack = variant_pack(ptrs, work.data_ptr());
    float ms = time_plan(h, *plan, pack);
    if (ms >= 0 && ms < best_ms) {
      best_ms = ms;
      best.plan = std::move(plan);
      best.workspace = ws;
      best.ms = ms;
    }
  }
  return best;
}

// Builds the operation graph of `op` for tensors shaped like x, w, y (y: the output, or dy), asks
// the heuristics for candidate engine configurations, keeps those that finalize, fit the
// workspace cap and respect the precision (no tensor-core TF32 engines in strict fp32; for
// float16/bfloat16 data tensor cores are the point, and only engines that down-convert the inputs
// further are skipped, as PyTorch does), times them on scratch buffers and returns the fastest.
// With b (a [1, K, 1, 1] view of the bias) a forward graph adds it to the convolution's float32
// result, and with act == Act::Relu applies relu, before the one rounding to y's dtype: cuDNN's
// runtime fusion makes that one kernel, the epilogue in registers.
BePlan build(cudnnHandle_t h, Op op, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
             size_t max_ws, Precision precision, const Tensor& b = Tensor(), int act = -1) {
  const bool epilogue = op == Op::Fwd && b.defined();
  Desc xd = tensor(x, kX), wd = tensor(w, kW), yd = tensor(y, kY);
  // The epilogue's intermediates: the convolution's result and the sum, float32, never in memory.
  Desc cd = epilogue ? tensor(y, kConv, true) : Desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  Desc sd = epilogue && act >= 0 ? tensor(y, kSum, true) : Desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  Desc bd = epilogue ? tensor(b, kB) : Desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t dims = 2, pre[2] = {p.pad_h, p.pad_w}, dil[2] = {1, 1}, str[2] = {p.stride_h, p.stride_w};
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pre)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
  if (conv.finalize() != CUDNN_STATUS_SUCCESS) return {};
  float one = 1, zero = 0;
  std::unique_ptr<Desc> o;
  if (op == Op::Fwd) {
    o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    o->ref(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, xd).ref(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, wd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, epilogue ? cd : yd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  } else if (op == Op::BwdData) {
    o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    o->ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, xd).ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, wd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, yd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  } else {
    o = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    o->ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, xd).ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, wd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, yd)
        .ref(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
  }
  if (o->finalize() != CUDNN_STATUS_SUCCESS) return {};
  std::vector<cudnnBackendDescriptor_t> ops{o->d};
  std::vector<Desc> kept;  // the pointwise descriptors, alive until the graph is finalized
  kept.reserve(4);
  // One pointwise operation: out = mode(in, in2), in float32.
  auto pointwise = [&](cudnnPointwiseMode_t mode, const Desc& in, const Desc* in2, const Desc& out) {
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    Desc& pw = kept.emplace_back(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (pw.finalize() != CUDNN_STATUS_SUCCESS) return false;
    Desc& op = kept.emplace_back(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.ref(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).ref(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in);
    if (in2) op.ref(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *in2);
    op.ref(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
    if (op.finalize() != CUDNN_STATUS_SUCCESS) return false;
    ops.push_back(op.d);
    return true;
  };
  if (epilogue && !pointwise(CUDNN_POINTWISE_ADD, cd, &bd, act >= 0 ? sd : yd)) return {};
  if (epilogue && act >= 0 && !pointwise(CUDNN_POINTWISE_RELU_FWD, sd, nullptr, yd)) return {};
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()), ops.data())
      .set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &h);
  if (graph.finalize() != CUDNN_STATUS_SUCCESS) return {};

  std::vector<std::pair<int64_t, Tensor>> operands{{kX, x}, {kW, w}, {kY, y}};
  if (epilogue) operands.emplace_back(kB, b);
  return fastest(h, candidates(graph), operands, max_ws, precision);
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// Runs a plan on these pointers on ctx's lane; false (nothing run) when a pointer is not aligned for it.
bool execute(const ExecContext& ctx, const BePlan& bp, const Pointers& p) {
  if (!bp.plan) return false;
  for (int i = 0; i < p.n; ++i)
    if (!aligned(p.ptrs[i])) return false;
  Tensor ws = empty(Shape{std::max<int64_t>(bp.workspace, 1)}, DType::u8, kCUDA);
  Desc pack = variant_pack(p, ws.data_ptr());
  LOUPE_CUDNN_CHECK(cudnnBackendExecute(cuda::cudnn(ctx), bp.plan->d, pack.d));
  return true;
}

bool execute(const ExecContext& ctx, const BePlan& bp, void* x, void* w, void* y) {
  Pointers p;
  p.add(kX, x);
  p.add(kW, w);
  p.add(kY, y);
  return execute(ctx, bp, p);
}

// Runs a plan whatever the alignment, for where no legacy algorithm can take over: a tensor at an
// unaligned address (a view at an odd offset) is copied to new storage first, and the output
// (slot `out`: 0 x, 1 w, 2 y) written through such a copy.
void execute_realigned(const ExecContext& ctx, const BePlan& bp, const Tensor& x, const Tensor& w, const Tensor& y,
                       int out) {
  Tensor t[3] = {x, w, y}, run[3];
  for (int i = 0; i < 3; ++i) {
    run[i] = t[i];
    if (aligned(t[i].data_ptr())) continue;
    run[i] = fresh_like(t[i]);
    if (i != out) copy_(run[i], t[i]);
  }
  LOUPE_CHECK(execute(ctx, bp, run[0].data_ptr(), run[1].data_ptr(), run[2].data_ptr()),
              "conv2d: no cuDNN plan to run");
  if (run[out].data_ptr() != t[out].data_ptr()) copy_(t[out], run[out]);
}

}  // namespace be

struct Plan {
  std::unique_ptr<cuda::TensorDesc> x, y;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t ws_fwd = 0, ws_data = 0, ws_filter = 0;
  bool ok_fwd = false, ok_data = false, ok_filter = false;  // whether the legacy search found each
  be::BePlan be_fwd, be_data, be_filter;  // preferred; the legacy algorithms above are the fallback
  ~Plan() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Shapes, stride, padding, precision, channels-last and dtype.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int, bool, int>;

Key problem_key(const ExecContext& ctx, const Tensor& x, const Tensor& w, const Conv2dParams& p, bool nhwc) {
  return Key{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), p.stride_h, p.stride_w,
             p.pad_h, p.pad_w, int(ctx.precision), nhwc, int(x.dtype())};
}

// LOUPE_VERBOSE=conv prints each problem's legacy candidates and what was kept.
bool conv_verbose() {
  static const bool on = knobs::verbose("conv");
  return on;
}

// The fastest candidate that succeeded within the workspace limit and ran with the math type the
// descriptor will execute with: cudnnFind also times other math types, and an algorithm found
// under another one can fail when called (bfloat16 backward-data returned CUDNN_STATUS_BAD_PARAM
// when compute-sanitizer's slower timings made such a candidate the fastest).
template <class Perf>
const Perf& pick(const Perf* perf, int n, const char* what, cudnnMathType_t math) {
  if (conv_verbose())
    for (int i = 0; i < n; ++i)
      std::fprintf(stderr, "loupe conv: %s candidate algo %d status %d time %.4f ms memory %zu math %d (descriptor %d)\n",
                   what, int(perf[i].algo), int(perf[i].status), double(perf[i].time), perf[i].memory,
                   int(perf[i].mathType), int(math));
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace && perf[i].mathType == math)
      return perf[i];
  LOUPE_FAIL("cuDNN found no usable ", what, " algorithm for this convolution");
}

// x, w, y: all NCHW or all channels-last (conv.cpp makes them so).
// The legacy API's descriptors for the problem; returns the math type they were given.
cudnnMathType_t set_descriptors(Plan& pl, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                                bool nhwc, Precision precision) {
  const bool half = x.dtype() != DType::f32;  // float16 or bfloat16
  const cudnnDataType_t dt = cuda::cudnn_dtype(x.dtype(), "conv2d");
  pl.x = std::make_unique<cuda::TensorDesc>(x);
  pl.y = std::make_unique<cuda::TensorDesc>(y);
  LOUPE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl.w));
  LOUPE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(pl.w, dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                               int(w.size(0)), int(w.size(1)), int(w.size(2)), int(w.size(3))));
  LOUPE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl.conv));
  // Compute type float32 for every data type (for 16-bit data, cuDNN's "pseudo half" configuration).
  LOUPE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl.conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32 stays fp32 (FMA math: no TF32 tensor ops) unless --precision tf32 allows it (the
  // default math type permits TF32 for float32 data, as PyTorch's allow_tf32 sets it); 16-bit
  // data runs on tensor cores.
  const cudnnMathType_t math =
      half ? CUDNN_TENSOR_OP_MATH : precision == Precision::TF32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  LOUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(pl.conv, math));
  return math;
}

// The legacy search's times for the three directions, and why a direction has none.
struct Legacy {
  float fwd = 0, data = 0, filter = 0;
  std::string why_fwd, why_data, why_filter;
};

// Timing the candidates happens once per problem; it synchronises, outside the steady state. A
// direction the legacy search refuses (it may, for some 16-bit problems) is left to the backend
// plan; only when neither has one is it an error.
Legacy find_legacy(cudnnHandle_t h, Plan& pl, cudnnMathType_t math) {
  Legacy t;
  auto legacy = [](std::string& why, auto&& find) {
    try {
      find();
      return true;
    } catch (const std::exception& e) {
      why = e.what();
      return false;
    }
  };
  pl.ok_fwd = legacy(t.why_fwd, [&] {
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    LOUPE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, pl.x->d, pl.w, pl.conv, pl.y->d,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
    const auto& f = pick(fp, n, "forward", math);
    pl.fwd = f.algo;
    pl.ws_fwd = f.memory;
    t.fwd = f.time;
  });
  pl.ok_data = legacy(t.why_data, [&] {
    int n = 0;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, pl.w, pl.y->d, pl.conv, pl.x->d,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
    const auto& bd = pick(dp, n, "backward-data", math);
    pl.bwd_data = bd.algo;
    pl.ws_data = bd.memory;
    t.data = bd.time;
  });
  pl.ok_filter = legacy(t.why_filter, [&] {
    int n = 0;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, pl.x->d, pl.y->d, pl.conv, pl.w,
                                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
    const auto& bf = pick(wp, n, "backward-filter", math);
    pl.bwd_filter = bf.algo;
    pl.ws_filter = bf.memory;
    t.filter = bf.time;
  });
  return t;
}

const Plan& plan_for(const ExecContext& ctx, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  static std::map<Key, std::unique_ptr<Plan>> cache;
  bool nhwc = x.memory_format() == MemoryFormat::ChannelsLast || w.memory_format() == MemoryFormat::ChannelsLast;
  const Key k = problem_key(ctx, x, w, p, nhwc);
  auto it = cache.find(k);
  if (it != cache.end()) return *it->second;

  // Found and timed on the lane that first meets the problem; cached for every lane.
  const cudnnHandle_t h = cuda::cudnn(ctx);
  auto pl = std::make_unique<Plan>();
  const Legacy t = find_legacy(h, *pl, set_descriptors(*pl, x, w, y, p, nhwc, ctx.precision));
  // The backend plan wins unless the legacy algorithm is faster on the GPU by more than the
  // extra host time the legacy call costs (the margin below; dev/bench_host measures it). Strict
  // fp32 often has FFT or Winograd algorithms that the backend heuristics do not offer.
  auto keep = [](be::BePlan bp, bool legacy_ok, float legacy_ms) {
    if (legacy_ok && bp.plan && bp.ms > legacy_ms + 0.02f) bp.plan.reset();
    return bp;
  };
  pl->be_fwd = keep(be::build(h, be::Op::Fwd, x, w, y, p, kMaxWorkspace, ctx.precision), pl->ok_fwd, t.fwd);
  pl->be_data = keep(be::build(h, be::Op::BwdData, x, w, y, p, kMaxWorkspace, ctx.precision), pl->ok_data, t.data);
  pl->be_filter =
      keep(be::build(h, be::Op::BwdFilter, x, w, y, p, kMaxWorkspace, ctx.precision), pl->ok_filter, t.filter);
  auto problem = [&] {
    return detail::concat("x ", x.shape().str(), " w ", w.shape().str(), " ", dtype_name(x.dtype()),
                          nhwc ? " channels-last" : " NCHW", ", stride ", p.stride_h, "x", p.stride_w, ", padding ",
                          p.pad_h, "x", p.pad_w);
  };
  if (conv_verbose())
    std::fprintf(stderr, "loupe conv: %s: legacy fwd %s (%d, %.4f ms) data %s (%d, %.4f ms) filter %s (%d, %.4f ms); "
                 "backend plans kept: fwd %d data %d filter %d\n", problem().c_str(), pl->ok_fwd ? "ok" : "none",
                 int(pl->fwd), double(t.fwd), pl->ok_data ? "ok" : "none", int(pl->bwd_data), double(t.data),
                 pl->ok_filter ? "ok" : "none", int(pl->bwd_filter), double(t.filter), bool(pl->be_fwd.plan),
                 bool(pl->be_data.plan), bool(pl->be_filter.plan));
  LOUPE_CHECK(pl->ok_fwd || pl->be_fwd.plan, "cuDNN has no forward convolution for ", problem(), ": ", t.why_fwd);
  LOUPE_CHECK(pl->ok_data || pl->be_data.plan, "cuDNN has no backward-data convolution for ", problem(), ": ",
              t.why_data);
  LOUPE_CHECK(pl->ok_filter || pl->be_filter.plan, "cuDNN has no backward-filter convolution for ", problem(), ": ",
              t.why_filter);
  return *cache.emplace(k, std::move(pl)).first->second;
}

Tensor workspace(size_t bytes, Device d) { return empty(Shape{int64_t(bytes)}, DType::u8, d); }

void check_dtypes(const Tensor& x, const Tensor& w, const Tensor& y, const char* op) {
  cuda::require_float(x, op);
  LOUPE_CHECK(w.dtype() == x.dtype() && y.dtype() == x.dtype(), op, " on CUDA: x, w and y (and their gradients) ",
              "must share one dtype, got ", dtype_name(x.dtype()), ", ", dtype_name(w.dtype()), " and ",
              dtype_name(y.dtype()));
}

void conv_forward(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  check_dtypes(x, w, y, "conv2d");
  const cudaStream_t s = cuda::stream(ctx);
  if (small_filter(x, w, y)) return forward_gemm(ctx, y, x, w, p, s);
  const Plan& pl = plan_for(ctx, x, w, y, p);
  if (be::execute(ctx, pl.be_fwd, x.data_ptr(), w.data_ptr(), y.data_ptr())) return;
  if (!pl.ok_fwd) return be::execute_realigned(ctx, pl.be_fwd, x, w, y, 2);
  Tensor ws = workspace(pl.ws_fwd, x.device());
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnConvolutionForward(cuda::cudnn(ctx), &one, pl.x->d, x.data_ptr(), pl.w, w.data_ptr(),
                                            pl.conv, pl.fwd, ws.data_ptr(), pl.ws_fwd, &zero, pl.y->d, y.data_ptr()));
}

// ---- The forward with its epilogue: y = act(conv(x, w) + b) in one cuDNN kernel ----------------

// Whether `one` ran faster than `pair` (each queues its work on s, false where it could not), on
// the GPU alone as a replayed graph runs them (queued behind a hold): each once first, so that
// plans are found and every kernel's module is loaded (a first launch outlasts the hold), then
// ten of each timed. Their microseconds a call in *t_one and *t_pair, for LOUPE_VERBOSE=conv.
bool runs_faster(cudaStream_t s, const std::function<bool()>& one, const std::function<bool()>& pair, float* t_one,
                 float* t_pair) {
  constexpr long long kHoldCycles = 2000000;
  one();
  pair();
  *t_one = cuda::time_on_gpu(s, 10, kHoldCycles, one);
  *t_pair = cuda::time_on_gpu(s, 10, kHoldCycles, pair);
  return *t_one >= 0 && (*t_pair < 0 || *t_one < *t_pair);
}

// The pointers of a fused forward's execution.
be::Pointers fused_pointers(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& b) {
  be::Pointers ptrs;
  ptrs.add(be::kX, x.data_ptr());
  ptrs.add(be::kW, w.data_ptr());
  ptrs.add(be::kY, y.data_ptr());
  ptrs.add(be::kB, b.data_ptr());
  return ptrs;
}

// The fused plan of a problem, kept (plan non-null) only where it ran faster than the convolution
// followed by bias_act's kernel: both timed once per problem on scratch outputs, as the algorithms
// are (runs_faster).
const be::BePlan& fused_for(const ExecContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                            const Tensor& b4, const Tensor& y, const Conv2dParams& p, int act) {
  static std::map<std::pair<Key, int>, be::BePlan> cache;
  const std::pair<Key, int> k{problem_key(ctx, x, w, p, x.memory_format() == MemoryFormat::ChannelsLast), act};
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  be::BePlan bp = be::build(cuda::cudnn(ctx), be::Op::Fwd, x, w, y, p, kMaxWorkspace, ctx.precision, b4, act);
  float fused = 0, pair = 0;
  bool keep = false;
  if (bp.plan) {
    Tensor sz = be::fresh_like(y), sy = be::fresh_like(y);
    const BiasActArgs a = bias_act_args(sz, act >= 0 ? std::optional<Act>(Act(act)) : std::nullopt, false, 0);
    const BiasActKernels& ba = kernels<BiasActKernels>(x.device());
    const be::Pointers ptrs = fused_pointers(x, w, sy, b);
    keep = runs_faster(
        cuda::stream(ctx), [&] { return be::execute(ctx, bp, ptrs); },
        [&] {
          conv_forward(ctx, sz, x, w, p);
          ba.forward(ctx, sy, sz, b, a);
          return true;
        },
        &fused, &pair);
  }
  if (conv_verbose())
    std::fprintf(stderr, "loupe conv: x %s w %s %s: fused bias%s %s (%.4f ms) against the convolution and bias_act "
                 "(%.4f ms): %s\n", x.shape().str().c_str(), w.shape().str().c_str(), dtype_name(x.dtype()),
                 act >= 0 ? " + relu" : "", bp.plan ? "plan" : "no plan", fused / 1e3, pair / 1e3,
                 keep ? "fused" : "separate");
  if (!keep) bp = be::BePlan{};
  return cache.emplace(k, std::move(bp)).first->second;
}

bool conv_forward_bias_act(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w,
                           const Tensor& b, int act, const Conv2dParams& p) {
  if ((act >= 0 && act != int(Act::Relu)) || !b.defined() || !b.is_contiguous() || b.dtype() != x.dtype())
    return false;
  check_dtypes(x, w, y, "conv2d");
  if (small_filter(x, w, y)) return false;
  const int64_t K = w.size(0);
  const bool cl = y.memory_format() == MemoryFormat::ChannelsLast;
  const Tensor b4 = as_strided(b, Shape{1, K, 1, 1}, cl ? Shape{K, 1, K, K} : Shape{K, 1, 1, 1}, b.impl()->offset);
  const be::BePlan& plan = fused_for(ctx, x, w, b, b4, y, p, act);
  return plan.plan && be::execute(ctx, plan, fused_pointers(x, w, y, b));
}

void conv_backward(const ExecContext& ctx, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w,
                   const Tensor& gy, const Conv2dParams& p) {
  check_dtypes(x, w, gy, "conv2d backward");
  LOUPE_CHECK((!gx.defined() || gx.dtype() == x.dtype()) && (!gw.defined() || gw.dtype() == x.dtype()),
              "conv2d backward on CUDA: the gradients must have x's dtype");
  Tensor gw_cudnn = gw;
  if (small_filter(x, w, gy) && (!gw.defined() || nhwc(gw))) {
    if (gw.defined()) filter_gemm(ctx, gw, x, w, gy, p, cuda::stream(ctx));
    if (!gx.defined()) return;
    gw_cudnn = Tensor();  // cuDNN computes the data gradient only
  }
  const Plan& pl = plan_for(ctx, x, w, gy, p);
  float one = 1, zero = 0;
  if (gx.defined() && !be::execute(ctx, pl.be_data, gx.data_ptr(), w.data_ptr(), gy.data_ptr())) {
    if (!pl.ok_data) {
      be::execute_realigned(ctx, pl.be_data, gx, w, gy, 0);
    } else {
      Tensor ws = workspace(pl.ws_data, x.device());
      LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardData(cuda::cudnn(ctx), &one, pl.w, w.data_ptr(), pl.y->d,
                                                     gy.data_ptr(), pl.conv, pl.bwd_data, ws.data_ptr(), pl.ws_data,
                                                     &zero, pl.x->d, gx.data_ptr()));
    }
  }
  if (gw_cudnn.defined() && !be::execute(ctx, pl.be_filter, x.data_ptr(), gw_cudnn.data_ptr(), gy.data_ptr())) {
    if (!pl.ok_filter) {
      be::execute_realigned(ctx, pl.be_filter, x, gw_cudnn, gy, 1);
    } else {
      Tensor ws = workspace(pl.ws_filter, x.device());
      LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cuda::cudnn(ctx), &one, pl.x->d, x.data_ptr(), pl.y->d,
                                                       gy.data_ptr(), pl.conv, pl.bwd_filter, ws.data_ptr(),
                                                       pl.ws_filter, &zero, pl.w, gw_cudnn.data_ptr()));
    }
  }
}

// Whether the one pass ran faster than bias_act's backward and the filter gradient, timed once per
// problem on scratch outputs (runs_faster, as fused_for times the forward's epilogue).
// Where bias_act's backward does not sum the bias itself, the pair is timed without that sum.
bool first_layer_wins(const ExecContext& ctx, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& gy,
                      int act, const Conv2dParams& p, const FirstLayer& g) {
  static std::map<std::pair<Key, int>, bool> cache;
  const std::pair<Key, int> key{problem_key(ctx, x, w, p, true), act};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Tensor sw = be::fresh_like(w), sb = empty(Shape{w.size(0)}, x.dtype(), x.device()), sgz = be::fresh_like(y);
  const BiasActArgs a = bias_act_args(y, act >= 0 ? std::optional<Act>(Act(act)) : std::nullopt, false, 0);
  const BiasActKernels& ba = kernels<BiasActKernels>(x.device());
  const bool sums_bias = bias_act_fuses_bias_grad(a.C, a.inner);
  float one = 0, pair = 0;
  const bool wins = runs_faster(
      cuda::stream(ctx),
      [&] {
        first_layer_run(ctx, sw, sb, x, y, gy, act, g);
        return true;
      },
      [&] {
        ba.backward(ctx, sgz, sums_bias ? sb : Tensor(), y, gy, a);
        conv_backward(ctx, Tensor(), sw, x, w, sgz, p);
        return true;
      },
      &one, &pair);
  if (conv_verbose())
    std::fprintf(stderr, "loupe conv: x %s w %s %s: the first layer's gradients in one pass (%.4f ms) against bias_act's "
                 "backward and the filter gradient (%.4f ms): %s\n", x.shape().str().c_str(), w.shape().str().c_str(),
                 dtype_name(x.dtype()), one / 1e3, pair / 1e3, wins ? "one pass" : "separate");
  return cache.emplace(key, wins).first->second;
}

bool conv_filter_bias_act_backward(const ExecContext& ctx, const Tensor& gw, const Tensor& gb, const Tensor& x,
                                   const Tensor& w, const Tensor& y, const Tensor& gy, int act, const Conv2dParams& p,
                                   bool always) {
  FirstLayer g{};
  if (!gw.defined() || !nhwc(gw) || !nhwc(w) || gw.dtype() != x.dtype() ||
      (gb.defined() && (gb.dtype() != x.dtype() || !gb.is_contiguous())) || !first_layer_fits(x, w, y, gy, act, p, g))
    return false;
  check_dtypes(x, w, gy, "conv2d backward");
  if (!always && !first_layer_wins(ctx, x, w, y, gy, act, p, g)) return false;
  first_layer_run(ctx, gw, gb, x, y, gy, act, g);
  return true;
}

const ConvKernels table{conv_forward, conv_backward, conv_forward_bias_act, conv_filter_bias_act_backward};
const RegisterBackend<ConvKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
