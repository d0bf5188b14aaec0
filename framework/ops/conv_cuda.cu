// cuDNN convolution. For each distinct shape the forward, backward-data and backward-filter
// algorithms are chosen once by timing them (cudnnFind*), as PyTorch's cudnn.benchmark does, and
// cached; workspaces come from loupe's stream-ordered pool.
#include <map>
#include <tuple>

#include "core/dispatch.h"
#include "core/precision.h"
#include "ops/conv.h"
#include "ops/cudnn_util.cuh"

namespace loupe {
namespace {

// A workspace cap keeps algorithm choice from claiming most of the GPU.
constexpr size_t kMaxWorkspace = size_t(512) << 20;

struct ConvDescs {
  cuda::TensorDesc x, y;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvDescs(const Tensor& xt, const Tensor& wt, const Tensor& yt, const Conv2dParams& p)
      : x(int(xt.size(0)), int(xt.size(1)), int(xt.size(2)), int(xt.size(3))),
        y(int(yt.size(0)), int(yt.size(1)), int(yt.size(2)), int(yt.size(3))) {
    LOUPE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    LOUPE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(wt.size(0)),
                                                 int(wt.size(1)), int(wt.size(2)), int(wt.size(3))));
    LOUPE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    LOUPE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1,
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // fp32 stays fp32 (FMA math: no TF32 tensor ops) unless --precision tf32 allows it (the
    // default math type permits TF32 for float32 data, as PyTorch's allow_tf32 sets it).
    LOUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, precision() == Precision::TF32 ? CUDNN_DEFAULT_MATH
                                                                                        : CUDNN_FMA_MATH));
  }
  ~ConvDescs() {
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct Algos {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  size_t ws_fwd, ws_data, ws_filter;
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int>;

template <class Perf>
const Perf& pick(const Perf* perf, int n, const char* what) {
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) return perf[i];
  LOUPE_FAIL("cuDNN found no usable ", what, " algorithm for this convolution");
}

const Algos& algos_for(const Tensor& x, const Tensor& w, const Conv2dParams& p, ConvDescs& d) {
  static std::map<Key, Algos> cache;
  Key k{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), p.stride_h, p.stride_w,
        p.pad_h, p.pad_w, int(precision())};
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  // Timing the candidates happens once per shape; it synchronises, outside the steady state.
  cudnnHandle_t h = cuda::cudnn();
  Algos a{};
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, d.x.d, d.w, d.conv, d.y.d,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fp));
  const auto& f = pick(fp, n, "forward");
  a.fwd = f.algo;
  a.ws_fwd = f.memory;
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, d.w, d.y.d, d.conv, d.x.d,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, dp));
  const auto& bd = pick(dp, n, "backward-data");
  a.bwd_data = bd.algo;
  a.ws_data = bd.memory;
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  LOUPE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x.d, d.y.d, d.conv, d.w,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp));
  const auto& bf = pick(wp, n, "backward-filter");
  a.bwd_filter = bf.algo;
  a.ws_filter = bf.memory;
  return cache.emplace(k, a).first->second;
}

Tensor workspace(size_t bytes, Device d) { return empty(Shape{int64_t(bytes)}, DType::u8, d); }

void forward(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  cuda::require_f32(x, "conv2d");
  ConvDescs d(x, w, y, p);
  const Algos& a = algos_for(x, w, p, d);
  Tensor ws = workspace(a.ws_fwd, x.device());
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnConvolutionForward(cuda::cudnn(), &one, d.x.d, x.data_ptr(), d.w, w.data_ptr(), d.conv,
                                            a.fwd, ws.data_ptr(), a.ws_fwd, &zero, d.y.d, y.data_ptr()));
}

void backward(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
              const Conv2dParams& p) {
  cuda::require_f32(x, "conv2d backward");
  ConvDescs d(x, w, gy, p);
  const Algos& a = algos_for(x, w, p, d);
  float one = 1, zero = 0;
  if (gx.defined()) {
    Tensor ws = workspace(a.ws_data, x.device());
    LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardData(cuda::cudnn(), &one, d.w, w.data_ptr(), d.y.d, gy.data_ptr(),
                                                   d.conv, a.bwd_data, ws.data_ptr(), a.ws_data, &zero, d.x.d,
                                                   gx.data_ptr()));
  }
  if (gw.defined()) {
    Tensor ws = workspace(a.ws_filter, x.device());
    LOUPE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cuda::cudnn(), &one, d.x.d, x.data_ptr(), d.y.d,
                                                     gy.data_ptr(), d.conv, a.bwd_filter, ws.data_ptr(), a.ws_filter,
                                                     &zero, d.w, gw.data_ptr()));
  }
}

const ConvKernels table{forward, backward};
const RegisterBackend<ConvKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
