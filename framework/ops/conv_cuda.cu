// cuDNN convolution. For each distinct problem (shapes, stride, padding, memory format and
// precision) the descriptors are built and the forward, backward-data and backward-filter
// algorithms chosen once by timing them (cudnnFind*), as PyTorch's cudnn.benchmark does, then
// cached: a step only looks the plan up. Workspaces come from loupe's stream-ordered pool.
// NCHW tensors take NCHW filters; channels-last (NHWC) tensors take KRSC filters, the layout of
// cuDNN's tensor-core kernels, which then need no transposes.
#include <map>
#include <memory>
#include <tuple>

#include "core/dispatch.h"
#include "core/precision.h"
#include "ops/conv.h"
#include "ops/cudnn_util.cuh"

namespace loupe {
namespace {

// A workspace cap keeps algorithm choice from claiming most of the GPU.
constexpr size_t kMaxWorkspace = size_t(512) << 20;

struct Plan {
  std::unique_ptr<cuda::TensorDesc> x, y;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t ws_fwd = 0, ws_data = 0, ws_filter = 0;
  ~Plan() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int, bool>;

template <class Perf>
const Perf& pick(const Perf* perf, int n, const char* what) {
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) return perf[i];
  LOUPE_FAIL("cuDNN found no usable ", what, " algorithm for this convolution");
}

// x, w, y: all NCHW or all channels-last (conv.cpp makes them so).
const Plan& plan_for(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  static std::map<Key, std::unique_ptr<Plan>> cache;
  bool nhwc = x.memory_format() == MemoryFormat::ChannelsLast || w.memory_format() == MemoryFormat::ChannelsLast;
  Key k{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), p.stride_h, p.stride_w,
        p.pad_h, p.pad_w, int(precision()), nhwc};
  auto it = cache.find(k);
  if (it != cache.end()) return *it->second;

  auto pl = std::make_unique<Plan>();
  pl->x = std::make_unique<cuda::TensorDesc>(x);
  pl->y = std::make_unique<cuda::TensorDesc>(y);
  LOUPE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl->w));
  LOUPE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(pl->w, CUDNN_DATA_FLOAT, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                               int(w.size(0)), int(w.size(1)), int(w.size(2)), int(w.size(3))));
  LOUPE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->conv));
  LOUPE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32 stays fp32 (FMA math: no TF32 tensor ops) unless --precision tf32 allows it (the
  // default math type permits TF32 for float32 data, as PyTorch's allow_tf32 sets it).
  LOUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(
      pl->conv, precision() == Precision::TF32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));

  // Timing the candidates happens once per problem; it synchronises, outside the steady state.
  cudnnHandle_t h = cuda::cudnn();
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, pl->x->d, pl->w, pl->conv, pl->y->d,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
  const auto& f = pick(fp, n, "forward");
  pl->fwd = f.algo;
  pl->ws_fwd = f.memory;
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, pl->w, pl->y->d, pl->conv, pl->x->d,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
  const auto& bd = pick(dp, n, "backward-data");
  pl->bwd_data = bd.algo;
  pl->ws_data = bd.memory;
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, pl->x->d, pl->y->d, pl->conv, pl->w,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
  const auto& bf = pick(wp, n, "backward-filter");
  pl->bwd_filter = bf.algo;
  pl->ws_filter = bf.memory;
  return *cache.emplace(k, std::move(pl)).first->second;
}

Tensor workspace(size_t bytes, Device d) { return empty(Shape{int64_t(bytes)}, DType::u8, d); }

void forward(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  cuda::require_f32(x, "conv2d");
  const Plan& pl = plan_for(x, w, y, p);
  Tensor ws = workspace(pl.ws_fwd, x.device());
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnConvolutionForward(cuda::cudnn(), &one, pl.x->d, x.data_ptr(), pl.w, w.data_ptr(), pl.conv,
                                            pl.fwd, ws.data_ptr(), pl.ws_fwd, &zero, pl.y->d, y.data_ptr()));
}

void backward(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
              const Conv2dParams& p) {
  cuda::require_f32(x, "conv2d backward");
  const Plan& pl = plan_for(x, w, gy, p);
  float one = 1, zero = 0;
  if (gx.defined()) {
    Tensor ws = workspace(pl.ws_data, x.device());
    LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardData(cuda::cudnn(), &one, pl.w, w.data_ptr(), pl.y->d, gy.data_ptr(),
                                                   pl.conv, pl.bwd_data, ws.data_ptr(), pl.ws_data, &zero, pl.x->d,
                                                   gx.data_ptr()));
  }
  if (gw.defined()) {
    Tensor ws = workspace(pl.ws_filter, x.device());
    LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cuda::cudnn(), &one, pl.x->d, x.data_ptr(), pl.y->d,
                                                     gy.data_ptr(), pl.conv, pl.bwd_filter, ws.data_ptr(),
                                                     pl.ws_filter, &zero, pl.w, gw.data_ptr()));
  }
}

const ConvKernels table{forward, backward};
const RegisterBackend<ConvKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
