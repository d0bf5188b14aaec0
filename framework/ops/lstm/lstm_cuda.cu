// LSTM through cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8).
// When a problem is first seen, cudnnGetRNNWeightParams is asked where every matrix and bias
// lives in cuDNN's weight space. Where that is loupe's layout (ops/lstm/lstm.h; one unidirectional
// layer, measured on cuDNN 9.14) the flat weights are passed as they are; otherwise (a
// bidirectional or stacked LSTM, whose biases cuDNN keeps after all the layer's matrices) a
// permutation computed from those answers gathers the weights into cuDNN's order before each call
// and the weight gradient back into loupe's after it: a copy of the (small) weight vector, never
// a silent misreading. Descriptors, the dropout state and the sequence-length array are built
// once per problem and cached; a step allocates only its work and reserve space.
//
// How it runs is chosen per problem by timing, as the convolutions' algorithms are: in float16 and
// bfloat16 loupe's own persistent kernels (ops/lstm/lstm_persist.h, 16 or 8 batch rows a block; cuDNN
// has no persistent bfloat16 kernels) are candidates beside cuDNN's. cuDNN's are the algorithm
// (CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, one persistent kernel for the whole recurrence where
// the hidden size allows it, or STANDARD, a GEMM and a pointwise kernel per step and direction) and
// the layout x and y reach it in (batch-major as loupe holds them, which cuDNN rearranges itself
// with padded I/O, or sequence-major packed, transposed here around the calls). The persistent
// kernel cut imdb_bilstm's forward + backward at batch 32 many times over
// (dev/bench_lstm; docs/performance.md, "Precision and memory format").
// LOUPE_LSTM_ALGO=loupe|loupe16|loupe8|standard|static|small_h|dynamic and
// LOUPE_LSTM_LAYOUT=batch|seq force a choice (the parity tests run each); LOUPE_VERBOSE=lstm
// prints the timings and the choice.
//
// cuDNN's LSTM has only the sigmoid gates: one with Keras's hard_sigmoid (LstmParams::hard_slope)
// runs on loupe's persistent kernels where they apply, else on loupe's stepwise ones
// (ops/lstm/lstm_step.h: a GEMM and a pointwise kernel per step, any dtype and size), never on cuDNN.
// LOUPE_LSTM_ALGO=step forces the stepwise kernels (sigmoid gates too: the parity tests).
//
// Data types: x, the weights, y, h, c and every gradient share one dtype: float32, float16, or
// bfloat16 (cuDNN 9.13 or newer); the 16-bit ones keep float32 arithmetic (mathPrec) on tensor
// cores, and their weight space holds 16-bit elements.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/gpu_timer.h"
#include "core/knobs.h"
#include "core/precision.h"
#include "ops/backend/cudnn_util.cuh"
#include "ops/index.h"
#include "ops/lstm/lstm.h"
#include "ops/lstm/lstm_persist.h"
#include "ops/lstm/lstm_step.h"
#include "ops/view.h"

namespace loupe {
namespace {

struct Choice {
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  bool seq_major = false;
  int own = 0;  // loupe's persistent kernels (ops/lstm/lstm_persist.h) with this many rows a block, not cuDNN
  bool step = false;  // loupe's stepwise kernels (ops/lstm/lstm_step.h), not cuDNN
};

// The choices to time, in order: loupe's kernels (16 or 8 rows a block), then, where those refuse,
// every cuDNN algorithm that can win (the persistent STATIC and DYNAMIC ones were far slower than
// the fastest choice at every reference shape: dev/bench_lstm prints each) in both layouts, unless
// forced. loupe16 and loupe8 force loupe's kernels with that many rows, or 16 where 8 cannot run
// (the tests' hidden size 16).
bool forced_first = false;  // take the first supported choice, untimed
bool forced_step = false;   // LOUPE_LSTM_ALGO=step: the stepwise kernels for sigmoid gates too
const std::vector<Choice>& lstm_candidates() {
  static const std::vector<Choice> c = [] {
    std::vector<cudnnRNNAlgo_t> algos{CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_STANDARD};
    std::vector<bool> layouts{false, true};
    std::vector<int> own{16, 8};
    bool step = true;
    const std::optional<std::string> algo = knobs::choice("LOUPE_LSTM_ALGO");
    if (const char* a = algo ? algo->c_str() : nullptr) {
      step = forced_step = !std::strcmp(a, "step");
      own = !std::strcmp(a, "loupe") ? std::vector<int>{16, 8}
            : !std::strcmp(a, "loupe16") ? std::vector<int>{16}
            : !std::strcmp(a, "loupe8")  ? std::vector<int>{8, 16}
                                         : std::vector<int>{};
      forced_first = !std::strcmp(a, "loupe16") || !std::strcmp(a, "loupe8") || step;
      if (!own.empty() || step) algos = {}, layouts = {true};
      else if (!std::strcmp(a, "static")) algos = {CUDNN_RNN_ALGO_PERSIST_STATIC};
      else if (!std::strcmp(a, "small_h")) algos = {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H};
      else if (!std::strcmp(a, "dynamic")) algos = {CUDNN_RNN_ALGO_PERSIST_DYNAMIC};
      else if (!std::strcmp(a, "standard")) algos = {CUDNN_RNN_ALGO_STANDARD};
      else LOUPE_FAIL("LOUPE_LSTM_ALGO: loupe, loupe16, loupe8, step, standard, static, small_h or dynamic, got ", a);
    }
    if (const std::optional<std::string> l = knobs::choice("LOUPE_LSTM_LAYOUT")) layouts = {*l == "seq"};
    std::vector<Choice> r;
    for (int rows : own) r.push_back(Choice{CUDNN_RNN_ALGO_STANDARD, true, rows});
    for (cudnnRNNAlgo_t a : algos)
      for (bool sm : layouts) r.push_back(Choice{a, sm});
    // Last: it runs a hard_sigmoid LSTM that nothing above can (cuDNN refuses one, below).
    if (step) r.push_back(Choice{CUDNN_RNN_ALGO_STANDARD, false, 0, true});
    return r;
  }();
  return c;
}

struct RnnData {  // a cudnnRNNDataDescriptor_t, every sequence full length
  cudnnRNNDataDescriptor_t d = nullptr;
  RnnData(int64_t N, int64_t T, int64_t vec, bool seq_major, cudnnDataType_t dt) {
    LOUPE_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&d));
    std::vector<int> lengths(static_cast<size_t>(N), static_cast<int>(T));
    LOUPE_CUDNN_CHECK(cudnnSetRNNDataDescriptor(
        d, dt, seq_major ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED : CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
        int(T), int(N), int(vec), lengths.data(), nullptr));
  }
  ~RnnData() { cudnnDestroyRNNDataDescriptor(d); }
};

struct State3d {  // [L*D, N, H] for h and c
  cudnnTensorDescriptor_t d = nullptr;
  State3d(int64_t LD, int64_t N, int64_t H, cudnnDataType_t dt) {
    LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    int dims[3] = {int(LD), int(N), int(H)}, strides[3] = {int(N * H), int(H), 1};
    LOUPE_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, dt, 3, dims, strides));
  }
  ~State3d() { cudnnDestroyTensorDescriptor(d); }
};

struct Plan {
  Choice choice;
  LstmParams params;
  DType dtype = DType::f32;  // of x, the weights, y, h, c and the gradients
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

// Where cuDNN keeps each matrix and bias of the weight space, against ops/lstm/lstm.h's layout: fills
// the permutations when they differ (the matrices themselves are [H, in] row-major in both).
// cuDNN answers with addresses; element offsets are those over the dtype's size.
void map_layout(cudnnHandle_t h, Plan& pl, const LstmParams& p) {
  const int64_t esize = int64_t(dtype_size(pl.dtype));
  Tensor probe = empty(Shape{int64_t(pl.weight_bytes)}, DType::u8, kCUDA);
  const char* base = static_cast<const char*>(probe.data_ptr());
  cudnnTensorDescriptor_t md, bd;
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&md));
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
  const int64_t H = p.hidden_size, count = lstm_weight_count(p), G = p.gates();
  std::vector<int32_t> to_cudnn(size_t(count), -1);
  bool same = true;
  auto piece = [&](const void* at, int64_t at_loupe, int64_t n) {
    int64_t bytes = static_cast<const char*>(at) - base, at_cudnn = bytes / esize;
    LOUPE_CHECK(bytes % esize == 0 && at_cudnn >= 0 && at_cudnn + n <= count,
                "cuDNN placed an LSTM weight outside its weight space or between elements");
    same &= at_cudnn == at_loupe;
    for (int64_t i = 0; i < n; ++i) to_cudnn[size_t(at_cudnn + i)] = int32_t(at_loupe + i);
  };
  for (int l = 0; l < p.num_layers; ++l)
    for (int dir = 0; dir < p.directions(); ++dir) {
      LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
      for (int id = 0; id < 2 * G; ++id) {  // the input's gates, then the recurrent ones
        void *m = nullptr, *b = nullptr;
        LOUPE_CUDNN_CHECK(cudnnGetRNNWeightParams(h, pl.rnn, l * p.directions() + dir, pl.weight_bytes,
                                                  probe.data_ptr(), id, md, &m, bd, &b));
        int64_t k = id % G;
        piece(m, id < G ? o.w + k * H * o.in : o.r + k * H * H, id < G ? H * o.in : H * H);
        piece(b, id < G ? o.b_w + k * H : o.b_r + k * H, H);
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

// v (flat, count elements) reordered by `order`: out[k] = v[order[k]], in v's dtype.
Tensor permuted(const Tensor& v, const Tensor& order) {
  return reshape(index_select(reshape(v, Shape{v.numel(), 1}), order, v.dtype()), Shape{v.numel()});
}

// The plan for one choice (throws where cuDNN does not support it). It serves every lane: ctx's
// precision is its cache key's, and its lane only sets the plan up (the dropout state).
std::unique_ptr<Plan> make_plan(const ExecContext& ctx, const LstmParams& p, int64_t N, int64_t T, uint64_t seed, Choice ch,
                                DType dtype) {
  cudnnHandle_t h = cuda::cudnn(ctx);
  auto pl = std::make_unique<Plan>();
  pl->choice = ch;
  pl->params = p;
  pl->dtype = dtype;
  LOUPE_CHECK(!p.gru || (!ch.own && !ch.step), "loupe's LSTM kernels have no GRU: cuDNN's runs it");
  if (ch.own) {
    std::string why;
    LOUPE_CHECK(lstm_persist::supports(p, dtype, ch.own, &why), why);
    return pl;
  }
  if (ch.step) {
    std::string why;
    LOUPE_CHECK(lstm_step::step_supports(p, dtype, &why), why);
    return pl;
  }
  LOUPE_CHECK(p.hard_slope == 0, "cuDNN's LSTM has only the sigmoid gates, not hard_sigmoid");
  const cudnnDataType_t dt = cuda::cudnn_dtype(dtype, "lstm");
  // The dropout state (cuDNN's own RNG) is set up once per problem, seeded from loupe's generator.
  LOUPE_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&pl->drop));
  size_t state_bytes = 0;
  LOUPE_CUDNN_CHECK(cudnnDropoutGetStatesSize(h, &state_bytes));
  pl->drop_states = empty(Shape{int64_t(state_bytes)}, DType::u8, kCUDA);
  LOUPE_CUDNN_CHECK(cudnnSetDropoutDescriptor(pl->drop, h, p.num_layers > 1 ? float(p.dropout) : 0.f,
                                              pl->drop_states.data_ptr(), state_bytes, (unsigned long long)seed));
  LOUPE_CUDNN_CHECK(cudnnCreateRNNDescriptor(&pl->rnn));
  // float32: FMA math unless --precision tf32 allows TF32 tensor ops; float16/bfloat16: tensor
  // cores, float32 arithmetic (mathPrec) either way.
  cudnnMathType_t math = dtype != DType::f32                 ? CUDNN_TENSOR_OP_MATH
                         : ctx.precision == Precision::TF32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                          : CUDNN_FMA_MATH;
  LOUPE_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      pl->rnn, ch.algo, p.gru ? CUDNN_GRU : CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, p.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
      CUDNN_LINEAR_INPUT, dt, CUDNN_DATA_FLOAT, math, int32_t(p.input_size), int32_t(p.hidden_size),
      int32_t(p.hidden_size), p.num_layers, pl->drop,
      ch.seq_major ? CUDNN_RNN_PADDED_IO_DISABLED : CUDNN_RNN_PADDED_IO_ENABLED));
  if (ch.algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) LOUPE_CUDNN_CHECK(cudnnBuildRNNDynamic(h, pl->rnn, int(N)));
  LOUPE_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, pl->rnn, &pl->weight_bytes));
  const size_t esize = dtype_size(dtype);
  LOUPE_CHECK(pl->weight_bytes == size_t(lstm_weight_count(p)) * esize, "cuDNN's LSTM weight space holds ",
              pl->weight_bytes / esize, " ", dtype_name(dtype), " elements, loupe's layout ", lstm_weight_count(p));
  map_layout(h, *pl, p);
  const int64_t DH = p.directions() * p.hidden_size;
  pl->x = std::make_unique<RnnData>(N, T, p.input_size, ch.seq_major, dt);
  pl->y = std::make_unique<RnnData>(N, T, DH, ch.seq_major, dt);
  pl->hc = std::make_unique<State3d>(int64_t(p.num_layers) * p.directions(), N, p.hidden_size, dt);
  pl->seq_lengths = from_vector(std::vector<int32_t>(size_t(N), int32_t(T)), Shape{N}, kCUDA);
  LOUPE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, pl->rnn, CUDNN_FWD_MODE_TRAINING, pl->x->d, &pl->work_train,
                                              &pl->reserve_train));
  size_t unused = 0;
  LOUPE_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, pl->rnn, CUDNN_FWD_MODE_INFERENCE, pl->x->d, &pl->work_infer,
                                              &unused));
  return pl;
}

Tensor byte_buffer(size_t n) { return empty(Shape{int64_t(std::max<size_t>(n, 1))}, DType::u8, kCUDA); }

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

using lstm_persist::swap01_into;
using lstm_persist::typed_view;

// What a training forward keeps for the backward: cuDNN's reserve space and, sequence-major, the
// transposed x (so that the backward need not transpose it again). One buffer: [reserve | xs].
struct Saved {
  Tensor buf, xs;
  size_t reserve = 0;
};
Saved make_saved(const Plan& pl, const Tensor& x) {
  Saved s;
  s.reserve = pl.reserve_train;
  const size_t xbytes = pl.choice.seq_major ? x.nbytes() : 0;
  s.buf = byte_buffer(align_up(s.reserve) + xbytes);
  if (xbytes) s.xs = typed_view(s.buf, align_up(s.reserve), Shape{x.size(1), x.size(0), x.size(2)}, x.dtype());
  return s;
}
Saved read_saved(const Plan& pl, const Tensor& buf, const Tensor& x) {
  Saved s;
  s.buf = buf;
  s.reserve = pl.reserve_train;
  if (pl.choice.seq_major) s.xs = typed_view(buf, align_up(s.reserve), Shape{x.size(1), x.size(0), x.size(2)}, x.dtype());
  return s;
}

// Sequence-major, y becomes a transposed view of cuDNN's [T, N, D*H] output: no copy (the models
// read the final states h, not y, so none is made later either). ctx: the caller's (its lane), and
// the plan's precision. stream: ctx's.
Tensor run_plan_forward(const ExecContext& ctx, const Plan& pl, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
                        const Tensor& c, bool training, cudaStream_t stream) {
  if (pl.choice.own) return lstm_persist::persist_forward(ctx, pl.params, x, w, y, h, c, training, pl.choice.own, stream);
  if (pl.choice.step) return lstm_step::step_forward(ctx, pl.params, x, w, y, h, c, training, stream);
  Tensor work = byte_buffer(training ? pl.work_train : pl.work_infer);
  Saved saved;
  if (training) saved = make_saved(pl, x);
  Tensor ws = pl.to_cudnn.defined() ? permuted(w, pl.to_cudnn) : w;
  const bool sm = pl.choice.seq_major;
  Tensor xs = x;
  if (sm) {
    xs = training ? saved.xs : empty(Shape{x.size(1), x.size(0), x.size(2)}, x.dtype(), kCUDA);
    swap01_into(xs, x);
  }
  Tensor ys = sm ? empty(Shape{y.size(1), y.size(0), y.size(2)}, y.dtype(), kCUDA) : y;
  LOUPE_CUDNN_CHECK(cudnnRNNForward(cuda::cudnn(ctx), pl.rnn,
                                    training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                    pl.seq_lengths.data<int32_t>(), pl.x->d, xs.data_ptr(), pl.y->d, ys.data_ptr(),
                                    pl.hc->d, nullptr, h.data_ptr(), pl.hc->d, nullptr,
                                    pl.params.gru ? nullptr : c.data_ptr(), pl.weight_bytes,
                                    ws.data_ptr(), work.nbytes(), work.data_ptr(),
                                    training ? pl.reserve_train : 0, training ? saved.buf.data_ptr() : nullptr));
  if (sm) y = transpose(ys, 0, 1);
  return saved.buf;
}

// The weight gradient (every layer's) from cuDNN, or loupe's kernels' first layer's (the rest came
// with the input gradient, run_plan_backward).
void run_plan_backward_weights(const ExecContext& ctx, const Plan& pl, const Tensor& x, const Tensor& y,
                               const Tensor& saved_buf, const Tensor& dw, cudaStream_t stream) {
  if (pl.choice.own) return lstm_persist::persist_backward_weights(ctx, pl.params, x, y, saved_buf, dw, stream);
  if (pl.choice.step) return;  // its one round, run_plan_backward, wrote all of dw
  Tensor work = byte_buffer(pl.work_train);  // scratch only: backward data's need not survive (PyTorch's does not)
  const Saved saved = read_saved(pl, saved_buf, x);
  const bool permute = pl.to_cudnn.defined();
  Tensor dws = permute ? empty(dw.shape(), dw.dtype(), kCUDA) : dw;
  Tensor ys = pl.choice.seq_major ? transpose(y, 0, 1) : y;  // as cuDNN wrote it (no copy)
  if (!ys.is_contiguous()) ys = contiguous(ys);
  Tensor xs = pl.choice.seq_major ? saved.xs : x;
  // The weight gradient is added to what the buffer holds (CUDNN_WGRAD_MODE_ADD): start from zero.
  LOUPE_CUDA_CHECK(cudaMemsetAsync(dws.data_ptr(), 0, dws.nbytes(), stream));
  LOUPE_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(cuda::cudnn(ctx), pl.rnn, CUDNN_WGRAD_MODE_ADD,
                                               pl.seq_lengths.data<int32_t>(), pl.x->d, xs.data_ptr(), pl.hc->d,
                                               nullptr, pl.y->d, ys.data_ptr(), pl.weight_bytes, dws.data_ptr(),
                                               work.nbytes(), work.data_ptr(), pl.reserve_train,
                                               saved.buf.data_ptr()));
  if (permute) copy_(dw, permuted(dws, pl.to_loupe));
}

// dy undefined: zero, made in the layout cuDNN reads; dx undefined: not needed (cuDNN computes it
// anyway, into a scratch buffer, and it is not transposed back). With `weights_later` the weight
// gradient (cuDNN: all of it; loupe's kernels: the first layer's W and R) is run_plan_backward_weights'.
void run_plan_backward(const ExecContext& ctx, const Plan& pl, const Tensor& x, const Tensor& w, const Tensor& y,
                       const Tensor& saved_buf, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
                       const Tensor& dw, bool weights_later, cudaStream_t stream) {
  if (pl.choice.own)
    return lstm_persist::persist_backward(ctx, pl.params, x, w, y, saved_buf, dy, dh, dc, dx, dw, pl.choice.own,
                                          weights_later, stream);
  if (pl.choice.step) return lstm_step::step_backward(ctx, pl.params, x, w, y, saved_buf, dy, dh, dc, dx, dw, stream);
  cudnnHandle_t h = cuda::cudnn(ctx);
  Tensor work = byte_buffer(pl.work_train);
  const Saved saved = read_saved(pl, saved_buf, x);
  const bool permute = pl.to_cudnn.defined();
  Tensor ws = permute ? permuted(w, pl.to_cudnn) : w;
  const bool sm = pl.choice.seq_major;
  const Shape y_shape = sm ? Shape{y.size(1), y.size(0), y.size(2)} : y.shape();
  // y as cuDNN wrote it: sequence-major, the forward's view transposed back (no copy).
  Tensor ys = sm ? transpose(y, 0, 1) : y;
  if (!ys.is_contiguous()) ys = contiguous(ys);
  Tensor xs = sm ? saved.xs : x;
  Tensor dys;
  if (!dy.defined()) {
    dys = zeros(y_shape, y.dtype(), kCUDA);
  } else if (sm) {
    dys = empty(y_shape, y.dtype(), kCUDA);
    swap01_into(dys, dy);
  } else {
    dys = contiguous(dy);
  }
  Tensor dxs = sm || !dx.defined() ? empty(Shape{xs.size(0), xs.size(1), xs.size(2)}, x.dtype(), kCUDA) : dx;
  LOUPE_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      h, pl.rnn, pl.seq_lengths.data<int32_t>(), pl.y->d, ys.data_ptr(), dys.data_ptr(), pl.x->d, dxs.data_ptr(),
      pl.hc->d, nullptr, dh.defined() ? dh.data_ptr() : nullptr, nullptr, pl.hc->d, nullptr,
      dc.defined() && !pl.params.gru ? dc.data_ptr() : nullptr, nullptr, pl.weight_bytes, ws.data_ptr(), work.nbytes(),
      work.data_ptr(),
      pl.reserve_train, saved.buf.data_ptr()));
  if (sm && dx.defined()) swap01_into(dx, dxs);
  if (!weights_later) run_plan_backward_weights(ctx, pl, x, y, saved_buf, dw, stream);
}

// Milliseconds of GPU time for a training forward and backward with this plan, on scratch buffers
// (the persistent kernels' speed does not depend on the values), on ctx's lane (s): after a first
// run (plans, workspaces, the pool's first blocks), three in a row behind a hold (core/gpu_timer.h),
// as a CUDA graph replays them. Timed one at a time, the host's launches were in the figure, which
// counts against a choice of many kernels (loupe's, with its GEMMs and transposes) in a close call.
double time_lstm_plan(const ExecContext& ctx, const Plan& pl, const LstmParams& p, int64_t N, int64_t T, cudaStream_t s) {
  const int64_t DH = p.directions() * p.hidden_size, LD = int64_t(p.num_layers) * p.directions();
  auto z = [&](const Shape& s) { return zeros(s, pl.dtype, kCUDA); };
  Tensor x = z(Shape{N, T, p.input_size}), w = z(Shape{lstm_weight_count(p)}), y = z(Shape{N, T, DH});
  Tensor h = z(Shape{LD, N, p.hidden_size}), c = z(Shape{LD, N, p.hidden_size});
  Tensor dx = z(x.shape()), dw = z(w.shape());
  auto run = [&] {
    Tensor yi = y;
    Tensor saved = run_plan_forward(ctx, pl, x, w, yi, h, c, true, s);
    // The models read h: dy is zero.
    run_plan_backward(ctx, pl, x, w, yi, saved, Tensor(), Tensor(), Tensor(), dx, dw, false, s);
    return true;
  };
  run();
  // 4M ticks (~2 ms): longer than the host takes to queue three runs of ~20 launches each.
  return cuda::time_on_gpu(s, 3, 4000000, run) / 1000.0;
}

// A choice's name, as LOUPE_LSTM_ALGO spells it.
const char* choice_name(const Choice& ch) {
  return ch.step                                            ? "step"
         : ch.own == 16                                     ? "loupe16"
         : ch.own == 8                                      ? "loupe8"
         : ch.algo == CUDNN_RNN_ALGO_STANDARD               ? "standard"
         : ch.algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? "small_h"
         : ch.algo == CUDNN_RNN_ALGO_PERSIST_STATIC         ? "static"
                                                            : "dynamic";
}

// Shapes, layers, direction, dropout, precision, dtype, the gates' hard_sigmoid slope, the cell.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, bool, double, int, int, float, bool>;

// The fastest supported choice for this problem, timed once and cached.
Plan& lstm_plan_for(const ExecContext& ctx, const LstmParams& p, int64_t N, int64_t T, uint64_t seed, DType dtype,
                    cudaStream_t stream) {
  static std::map<Key, std::unique_ptr<Plan>> cache;
  Key k{N, T, p.input_size, p.hidden_size, p.num_layers, p.bidirectional, p.dropout, int(ctx.precision), int(dtype),
        p.hard_slope, p.gru};
  auto it = cache.find(k);
  if (it != cache.end()) return *it->second;
  const std::vector<Choice>& cands = lstm_candidates();
  std::unique_ptr<Plan> best;
  double best_ms = 0;
  std::string why;  // the last refusal, reported if every choice is refused
  static const bool verbose = knobs::verbose("lstm");
  for (const Choice& ch : cands) {
    if (ch.step && p.hard_slope == 0 && !forced_step) continue;  // only where cuDNN's gates differ
    // cuDNN's candidates only where loupe's kernels refuse: running cuDNN's RNN once slows every
    // later step of the process, and loupe's kernels won at every shape timed (docs/performance.md,
    // "Precision and memory format").
    if (best && best->choice.own && !ch.own) break;
    const char* name = choice_name(ch);
    try {
      std::unique_ptr<Plan> pl = make_plan(ctx, p, N, T, seed, ch, dtype);
      double ms = cands.size() > 1 && !forced_first ? time_lstm_plan(ctx, *pl, p, N, T, stream) : 0;
      if (verbose)
        std::fprintf(stderr, "lstm N=%lld T=%lld in=%lld H=%lld %s: %s %s-major %.3f ms\n", (long long)N, (long long)T,
                     (long long)p.input_size, (long long)p.hidden_size, dtype_name(dtype), name,
                     ch.seq_major ? "seq" : "batch", ms);
      if (!best || ms < best_ms) best = std::move(pl), best_ms = ms;
      if (forced_first) break;
    } catch (const std::exception& e) {  // e.g. a hidden size past the persistent kernel's limit
      why = e.what();
      if (verbose) std::fprintf(stderr, "lstm: %s %s-major refused: %s\n", name, ch.seq_major ? "seq" : "batch", e.what());
    }
  }
  LOUPE_CHECK(best, "neither loupe's kernels nor cuDNN can run this ", dtype_name(dtype), " LSTM: ", why);
  note_lstm_cuda_plan(std::string(choice_name(best->choice)) + (best->choice.seq_major ? " seq" : " batch"));
  return *cache.emplace(k, std::move(best)).first->second;
}

// x, the weights and every other tensor in one dtype that cuDNN's RNNs take.
void check_lstm_dtypes(const char* op, const LstmParams& p, std::initializer_list<const Tensor*> ts) {
  const Tensor& x = **ts.begin();
  cuda::require_float(x, op);
  for (const Tensor* t : ts)
    LOUPE_CHECK(!t->defined() || t->dtype() == x.dtype(), op, " on CUDA: x, the weights, y, h, c and the gradients ",
                "must share one dtype, got ", dtype_name(x.dtype()), " and ", dtype_name(t->dtype()));
  // cuDNN's RNNs take bfloat16 from 9.13 on (and need compute capability 8.0 or newer for it);
  // loupe's kernels take it wherever they run.
  if (x.dtype() == DType::bf16 && cudnnGetVersion() < 91300 && !lstm_persist::supports(p, DType::bf16, 16, nullptr))
    LOUPE_FAIL(op, " in bfloat16 needs cuDNN 9.13 or newer, this is ", cudnnGetVersion(),
               "; use float16 (--precision fp16) or a newer cuDNN");
}

Tensor lstm_forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
                    const Tensor& c, bool training, uint64_t seed, uint64_t) {
  check_lstm_dtypes("lstm", p, {&x, &w, &y, &h, &c});
  // Dropout (p.dropout is 0 unless the op is training) needs cuDNN's training mode even when no
  // backward follows, since its inference mode never drops.
  training = training || (p.dropout > 0 && p.num_layers > 1);
  const cudaStream_t s = cuda::stream(ctx);
  return run_plan_forward(ctx, lstm_plan_for(ctx, p, x.size(0), x.size(1), seed, x.dtype(), s), x, w, y, h, c, training, s);
}

void lstm_backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                   const Tensor& saved, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
                   const Tensor& dw, uint64_t seed, uint64_t, bool weights_later) {
  check_lstm_dtypes("lstm backward", p, {&x, &w, &y, &dy, &dh, &dc, &dx, &dw});
  LOUPE_CHECK(saved.defined(), "lstm backward without a training-mode forward");
  const cudaStream_t s = cuda::stream(ctx);
  run_plan_backward(ctx, lstm_plan_for(ctx, p, x.size(0), x.size(1), seed, x.dtype(), s), x, w, y, saved, dy, dh, dc, dx, dw,
                    weights_later, s);
}

void lstm_backward_weights(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                           const Tensor& saved, const Tensor& dw) {
  check_lstm_dtypes("lstm backward", p, {&x, &w, &y, &dw});
  const cudaStream_t s = cuda::stream(ctx);
  // The plan the first round used (cached by shape; dropout's seed only matters to a new plan).
  run_plan_backward_weights(ctx, lstm_plan_for(ctx, p, x.size(0), x.size(1), 0, x.dtype(), s), x, y, saved, dw, s);
}

const LstmKernels table{lstm_forward, lstm_backward, lstm_backward_weights};
const RegisterBackend<LstmKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
