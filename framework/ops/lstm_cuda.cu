// LSTM through cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8).
// When a problem is first seen, cudnnGetRNNWeightParams is asked where every matrix and bias
// lives in cuDNN's weight space. Where that is loupe's layout (ops/lstm.h; one unidirectional
// layer, measured on cuDNN 9.14) the flat weights are passed as they are; otherwise (a
// bidirectional or stacked LSTM, whose biases cuDNN keeps after all the layer's matrices) a
// permutation computed from those answers gathers the weights into cuDNN's order before each call
// and the weight gradient back into loupe's after it: a copy of the (small) weight vector, never
// a silent misreading. Descriptors, the dropout state and the sequence-length array are built
// once per problem and cached; a step allocates only its work and reserve space.
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "core/precision.h"
#include "ops/cudnn_util.cuh"
#include "ops/index.h"
#include "ops/lstm.h"

namespace loupe {
namespace {

struct RnnData {  // a cudnnRNNDataDescriptor_t, batch-major, every sequence full length
  cudnnRNNDataDescriptor_t d = nullptr;
  RnnData(int64_t N, int64_t T, int64_t vec) {
    LOUPE_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&d));
    std::vector<int> lengths(static_cast<size_t>(N), static_cast<int>(T));
    LOUPE_CUDNN_CHECK(cudnnSetRNNDataDescriptor(d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                                int(T), int(N), int(vec), lengths.data(), nullptr));
  }
  ~RnnData() { cudnnDestroyRNNDataDescriptor(d); }
};

struct State3d {  // [L*D, N, H] for h and c
  cudnnTensorDescriptor_t d = nullptr;
  State3d(int64_t LD, int64_t N, int64_t H) {
    LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    int dims[3] = {int(LD), int(N), int(H)}, strides[3] = {int(N * H), int(H), 1};
    LOUPE_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, dims, strides));
  }
  ~State3d() { cudnnDestroyTensorDescriptor(d); }
};

struct Plan {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t drop = nullptr;
  Tensor drop_states;  // cuDNN's dropout RNG state (lives as long as the descriptor)
  std::unique_ptr<RnnData> x, y;
  std::unique_ptr<State3d> hc;
  Tensor seq_lengths;  // int32 [N] on the device, all T
  // cuDNN's weight-space element k is loupe's element to_cudnn[k] (and loupe's j is cuDNN's
  // to_loupe[j]); undefined when the two layouts are the same.
  Tensor to_cudnn, to_loupe;
  size_t weight_bytes = 0, work_train = 0, reserve_train = 0, work_infer = 0;
  ~Plan() {
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (drop) cudnnDestroyDropoutDescriptor(drop);
  }
};

// Where cuDNN keeps each matrix and bias of the weight space, against ops/lstm.h's layout: fills
// the permutations when they differ (the matrices themselves are [H, in] row-major in both).
void map_layout(cudnnHandle_t h, Plan& pl, const LstmParams& p) {
  Tensor probe = empty(Shape{int64_t(pl.weight_bytes)}, DType::u8, kCUDA);
  const char* base = static_cast<const char*>(probe.data_ptr());
  cudnnTensorDescriptor_t md, bd;
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&md));
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
  const int64_t H = p.hidden_size, count = lstm_weight_count(p);
  std::vector<int32_t> to_cudnn(size_t(count), -1);
  bool same = true;
  auto piece = [&](int64_t at_cudnn, int64_t at_loupe, int64_t n) {
    LOUPE_CHECK(at_cudnn >= 0 && at_cudnn + n <= count, "cuDNN placed an LSTM weight outside its weight space");
    same &= at_cudnn == at_loupe;
    for (int64_t i = 0; i < n; ++i) to_cudnn[size_t(at_cudnn + i)] = int32_t(at_loupe + i);
  };
  for (int l = 0; l < p.num_layers; ++l)
    for (int dir = 0; dir < p.directions(); ++dir) {
      LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
      for (int id = 0; id < 8; ++id) {
        void *m = nullptr, *b = nullptr;
        LOUPE_CUDNN_CHECK(cudnnGetRNNWeightParams(h, pl.rnn, l * p.directions() + dir, pl.weight_bytes,
                                                  probe.data_ptr(), id, md, &m, bd, &b));
        int64_t k = id % 4;
        piece((static_cast<const char*>(m) - base) / 4, id < 4 ? o.w + k * H * o.in : o.r + k * H * H,
              id < 4 ? H * o.in : H * H);
        piece((static_cast<const char*>(b) - base) / 4, id < 4 ? o.b_w + k * H : o.b_r + k * H, H);
      }
    }
  cudnnDestroyTensorDescriptor(md);
  cudnnDestroyTensorDescriptor(bd);
  if (same) return;
  std::vector<int32_t> to_loupe(size_t(count), -1);
  for (int64_t k = 0; k < count; ++k) {
    LOUPE_CHECK(to_cudnn[size_t(k)] >= 0, "cuDNN's LSTM weight space has an element loupe's layout lacks");
    to_loupe[size_t(to_cudnn[size_t(k)])] = int32_t(k);
  }
  pl.to_cudnn = from_vector(to_cudnn, Shape{count}, kCUDA);
  pl.to_loupe = from_vector(to_loupe, Shape{count}, kCUDA);
}

// v (flat, count elements) reordered by `order`: out[k] = v[order[k]].
Tensor permuted(const Tensor& v, const Tensor& order) {
  return index_select(v.reshape(Shape{v.numel(), 1}), order, DType::f32).reshape(Shape{v.numel()});
}

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, bool, double, int>;

Plan& plan_for(const LstmParams& p, int64_t N, int64_t T, uint64_t seed) {
  static std::map<Key, std::unique_ptr<Plan>> cache;
  Key k{N, T, p.input_size, p.hidden_size, p.num_layers, p.bidirectional, p.dropout, int(precision())};
  auto it = cache.find(k);
  if (it != cache.end()) return *it->second;
  cudnnHandle_t h = cuda::cudnn();
  auto pl = std::make_unique<Plan>();
  // The dropout state (cuDNN's own RNG) is set up once per problem, seeded from loupe's generator.
  LOUPE_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&pl->drop));
  size_t state_bytes = 0;
  LOUPE_CUDNN_CHECK(cudnnDropoutGetStatesSize(h, &state_bytes));
  pl->drop_states = empty(Shape{int64_t(state_bytes)}, DType::u8, kCUDA);
  LOUPE_CUDNN_CHECK(cudnnSetDropoutDescriptor(pl->drop, h, p.num_layers > 1 ? float(p.dropout) : 0.f,
                                              pl->drop_states.data_ptr(), state_bytes, (unsigned long long)seed));
  LOUPE_CUDNN_CHECK(cudnnCreateRNNDescriptor(&pl->rnn));
  cudnnMathType_t math = precision() == Precision::TF32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH;
  LOUPE_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      pl->rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
      p.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
      CUDNN_DATA_FLOAT, math, int32_t(p.input_size), int32_t(p.hidden_size), int32_t(p.hidden_size), p.num_layers,
      pl->drop, CUDNN_RNN_PADDED_IO_ENABLED));
  LOUPE_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, pl->rnn, &pl->weight_bytes));
  LOUPE_CHECK(pl->weight_bytes == size_t(lstm_weight_count(p)) * 4, "cuDNN's LSTM weight space holds ",
              pl->weight_bytes / 4, " floats, loupe's layout ", lstm_weight_count(p));
  map_layout(h, *pl, p);
  const int64_t DH = p.directions() * p.hidden_size;
  pl->x = std::make_unique<RnnData>(N, T, p.input_size);
  pl->y = std::make_unique<RnnData>(N, T, DH);
  pl->hc = std::make_unique<State3d>(int64_t(p.num_layers) * p.directions(), N, p.hidden_size);
  pl->seq_lengths = from_vector(std::vector<int32_t>(size_t(N), int32_t(T)), Shape{N}, kCUDA);
  LOUPE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, pl->rnn, CUDNN_FWD_MODE_TRAINING, pl->x->d, &pl->work_train,
                                              &pl->reserve_train));
  size_t unused = 0;
  LOUPE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, pl->rnn, CUDNN_FWD_MODE_INFERENCE, pl->x->d, &pl->work_infer,
                                              &unused));
  return *cache.emplace(k, std::move(pl)).first->second;
}

Tensor bytes(size_t n) { return empty(Shape{int64_t(std::max<size_t>(n, 1))}, DType::u8, kCUDA); }

Tensor forward(const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& h,
               const Tensor& c, bool training, uint64_t seed, uint64_t) {
  cuda::require_f32(x, "lstm");
  // Dropout (p.dropout is 0 unless the op is training) needs cuDNN's training mode even when no
  // backward follows, since its inference mode never drops.
  training = training || (p.dropout > 0 && p.num_layers > 1);
  Plan& pl = plan_for(p, x.size(0), x.size(1), seed);
  Tensor work = bytes(training ? pl.work_train : pl.work_infer);
  Tensor reserve = training ? bytes(pl.reserve_train) : Tensor();
  Tensor ws = pl.to_cudnn.defined() ? permuted(w, pl.to_cudnn) : w;
  LOUPE_CUDNN_CHECK(cudnnRNNForward(cuda::cudnn(), pl.rnn, training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                    pl.seq_lengths.data<int32_t>(), pl.x->d, x.data_ptr(), pl.y->d, y.data_ptr(),
                                    pl.hc->d, nullptr, h.data_ptr(), pl.hc->d, nullptr, c.data_ptr(), pl.weight_bytes,
                                    ws.data_ptr(), work.nbytes(), work.data_ptr(),
                                    training ? pl.reserve_train : 0, training ? reserve.data_ptr() : nullptr));
  return reserve;
}

void backward(const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& saved,
              const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx, const Tensor& dw, uint64_t seed,
              uint64_t) {
  cuda::require_f32(x, "lstm backward");
  LOUPE_CHECK(saved.defined(), "lstm backward without a training-mode forward");
  Plan& pl = plan_for(p, x.size(0), x.size(1), seed);
  cudnnHandle_t h = cuda::cudnn();
  Tensor work = bytes(pl.work_train);
  const bool permute = pl.to_cudnn.defined();
  Tensor ws = permute ? permuted(w, pl.to_cudnn) : w;
  Tensor dws = permute ? empty(dw.shape(), DType::f32, kCUDA) : dw;
  LOUPE_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      h, pl.rnn, pl.seq_lengths.data<int32_t>(), pl.y->d, y.data_ptr(), dy.data_ptr(), pl.x->d, dx.data_ptr(),
      pl.hc->d, nullptr, dh.defined() ? dh.data_ptr() : nullptr, nullptr, pl.hc->d, nullptr,
      dc.defined() ? dc.data_ptr() : nullptr, nullptr, pl.weight_bytes, ws.data_ptr(), work.nbytes(), work.data_ptr(),
      pl.reserve_train, saved.data_ptr()));
  // The weight gradient is added to what the buffer holds (CUDNN_WGRAD_MODE_ADD): start from zero.
  LOUPE_CUDA_CHECK(cudaMemsetAsync(dws.data_ptr(), 0, dws.nbytes(), cuda::stream()));
  LOUPE_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(h, pl.rnn, CUDNN_WGRAD_MODE_ADD, pl.seq_lengths.data<int32_t>(),
                                               pl.x->d, x.data_ptr(), pl.hc->d, nullptr, pl.y->d, y.data_ptr(),
                                               pl.weight_bytes, dws.data_ptr(), work.nbytes(), work.data_ptr(),
                                               pl.reserve_train, saved.data_ptr()));
  if (permute) copy_(dw, permuted(dws, pl.to_loupe));
}

const LstmKernels table{forward, backward};
const RegisterBackend<LstmKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
