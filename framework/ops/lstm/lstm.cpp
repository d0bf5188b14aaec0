#include "ops/lstm/lstm.h"

#include <mutex>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "core/random.h"
#include "ops/view.h"

namespace loupe {

namespace {
std::mutex g_plans_mutex;
std::vector<std::string>& plans() {
  static std::vector<std::string> p;
  return p;
}
}  // namespace

std::vector<std::string> lstm_cuda_plans() {
  std::lock_guard<std::mutex> l(g_plans_mutex);
  return plans();
}

void note_lstm_cuda_plan(const std::string& plan) {
  std::lock_guard<std::mutex> l(g_plans_mutex);
  plans().push_back(plan);
}

int64_t lstm_weight_count(const LstmParams& p) {
  int64_t n = 0;
  for (int l = 0; l < p.num_layers; ++l) {
    int64_t in = l == 0 ? p.input_size : p.directions() * p.hidden_size;
    n += p.directions() * (p.gates() * p.hidden_size * (in + p.hidden_size) + 2 * p.gates() * p.hidden_size);
  }
  return n;
}

LstmLayerOffsets lstm_layer_offsets(const LstmParams& p, int layer, int direction) {
  LOUPE_CHECK(layer >= 0 && layer < p.num_layers && direction >= 0 && direction < p.directions(),
              "lstm_layer_offsets: no layer ", layer, " direction ", direction, " in a ", p.num_layers, "-layer ",
              p.bidirectional ? "bidirectional " : "", "LSTM");
  LstmParams below = p;
  below.num_layers = layer;
  int64_t H = p.hidden_size;
  LstmLayerOffsets o;
  o.in = layer == 0 ? p.input_size : p.directions() * H;
  const int64_t G = p.gates();
  o.w = lstm_weight_count(below) + direction * (G * H * (o.in + H) + 2 * G * H);
  o.r = o.w + G * H * o.in;
  o.b_w = o.r + G * H * H;
  o.b_r = o.b_w + G * H;
  return o;
}

namespace {

// FLOPs per (row, time step) of one pseudo-layer besides its GEMMs, by the conventions of
// core/flops.h: forward 2 bias adds per gate (8H), four activations (16H), the cell update
// (3H), tanh(c) (4H) and the output product (H); backward about as much (30H, bias sums included).
constexpr double kElementwiseForward = 32, kElementwiseBackward = 30;

// GEMM FLOPs of one forward pass: x W^T over all rows and h R^T per step, per pseudo-layer.
double gemm_flops(const LstmParams& p, int64_t N, int64_t T) {
  double f = 0, H = double(p.hidden_size);
  for (int l = 0; l < p.num_layers; ++l) {
    double in = double(l == 0 ? p.input_size : p.directions() * p.hidden_size);
    f += p.directions() * 2.0 * double(N * T) * p.gates() * H * (in + H);
  }
  return f;
}

// Everything but the GEMMs (forward or backward), dropout included.
double elementwise_flops(const LstmParams& p, int64_t N, int64_t T, bool backward) {
  double per = backward ? kElementwiseBackward : kElementwiseForward;
  double f = double(p.num_layers * p.directions()) * double(N * T) * per * double(p.hidden_size);
  if (p.dropout > 0) f += double(p.num_layers - 1) * double(N * T * p.directions() * p.hidden_size);
  return f;
}

// Keras's one bias (LstmParams::single_bias): b_R's gradient is zero, so b_R stays where it started.
void zero_second_bias(const LstmParams& p, const Tensor& dw) {
  if (!p.single_bias) return;
  for (int l = 0; l < p.num_layers; ++l)
    for (int d = 0; d < p.directions(); ++d) {
      const int64_t at = lstm_layer_offsets(p, l, d).b_r;
      fill_(slice(dw, 0, at, at + p.gates() * p.hidden_size), 0);
    }
}

struct LstmBackward : autograd::Node {
  LstmParams p;
  ExecContext ctx;  // the forward's: the backward uses the plan its forward did
  Tensor x, w, y, saved;
  Tensor dw_later;  // between the two rounds: dw without the first layer's W and R gradients
  uint64_t seed = 0, offset = 0;
  bool need_x = false, need_w = false;
  bool two_rounds = false;  // dx first, the first layer's weight GEMMs in finish()
  const char* name() const override { return "LstmBackward"; }
  std::vector<int> later_inputs() const override { return two_rounds ? std::vector<int>{1} : std::vector<int>{}; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    if (!g[0].defined() && !g[1].defined() && !g[2].defined()) return {Tensor(), Tensor()};
    // Undefined output gradients are zero: the kernels make them as their layout needs (the models
    // read h only, so dy is zero; and cuDNN wants it sequence-major).
    Tensor dy = g[0];
    Tensor dh = g[1].defined() ? contiguous(g[1]) : Tensor();
    Tensor dc = g[2].defined() ? contiguous(g[2]) : Tensor();
    Tensor dx = need_x ? empty(x.shape(), x.dtype(), x.device()) : Tensor();
    Tensor dw = empty(w.shape(), w.dtype(), w.device());
    kernels<LstmKernels>(x.device()).backward(ctx, p, x, w, y, saved, dy, dh, dc, dx, dw, seed, offset, two_rounds);
    int64_t N = x.size(0), T = x.size(1);
    add_flops(2 * gemm_flops(p, N, T) + elementwise_flops(p, N, T, true));
    if (two_rounds) {
      dw_later = dw;
      return {dx, Tensor()};
    }
    zero_second_bias(p, dw);
    return {need_x ? dx : Tensor(), need_w ? dw : Tensor()};
  }
  std::vector<Tensor> finish() override {
    if (!dw_later.defined()) return {Tensor(), Tensor()};  // apply() had no gradient to pass on
    kernels<LstmKernels>(x.device()).backward_weights(ctx, p, x, w, y, saved, dw_later);
    zero_second_bias(p, dw_later);
    Tensor dw = dw_later;
    dw_later = Tensor();
    return {Tensor(), dw};
  }
  void release() override { x = w = y = saved = dw_later = Tensor(); }
};

}  // namespace

LstmResult lstm(const Tensor& x, const Tensor& w, const LstmParams& p, bool training) {
  OpScope scope_("lstm", {&x, &w});
  LOUPE_CHECK(p.input_size > 0 && p.hidden_size > 0 && p.num_layers > 0, "lstm: input_size, hidden_size and ",
              "num_layers must be positive, got ", p.input_size, ", ", p.hidden_size, " and ", p.num_layers);
  LOUPE_CHECK(p.dropout >= 0 && p.dropout < 1, "lstm: dropout must be in [0, 1), got ", p.dropout);
  LOUPE_CHECK(p.hard_slope >= 0 && p.hard_slope <= 1, "lstm: hard_slope must be in [0, 1], got ", p.hard_slope);
  LOUPE_CHECK(x.defined() && w.defined(), "lstm: undefined input or weights");
  LOUPE_CHECK(x.dim() == 3 && x.size(2) == p.input_size, "lstm: x must be [N, T, ", p.input_size,
              "] (batch first), got ", x.shape().str());
  LOUPE_CHECK(x.size(0) >= 1 && x.size(1) >= 1, "lstm: needs at least one sequence and one time step, got ",
              x.shape().str());
  LOUPE_CHECK(w.dim() == 1 && w.numel() == lstm_weight_count(p), "lstm: the flat weights must be [",
              lstm_weight_count(p), "], got ", w.shape().str());
  LOUPE_CHECK(x.device() == w.device(), "lstm: x on ", x.device().str(), " but the weights on ", w.device().str());
  LOUPE_CHECK(!p.gru || (p.hard_slope == 0 && x.device().is_cuda()), "lstm: the GRU mode is cuDNN's (sigmoid gates, CUDA); "
              "nn::Recurrent computes the others");
  LOUPE_CHECK(x.dtype() == w.dtype() && is_floating(x.dtype()), "lstm: x and the weights must share one floating ",
              "dtype, got ", dtype_name(x.dtype()), " and ", dtype_name(w.dtype()));
  int64_t N = x.size(0), T = x.size(1), H = p.hidden_size, D = p.directions();
  Tensor xc, wc;
  {
    NoGradGuard g;  // the node below records x and w themselves
    xc = contiguous(x);
    wc = contiguous(w);
  }
  // The kernels apply dropout whenever their p.dropout > 0, so outside training it is zeroed here;
  // their `training` flag only says whether a backward pass will follow (and `saved` is needed).
  LstmParams kp = p;
  uint64_t seed = 0, offset = 0;
  if (training && p.dropout > 0 && p.num_layers > 1) {
    Generator& gen = default_generator();
    seed = gen.seed;
    offset = gen.take(uint64_t((p.num_layers - 1) * N * T * D * H));  // one mask per inter-layer output
  } else {
    kp.dropout = 0;
  }
  bool grad = autograd::needs_grad({&x, &w});
  LstmResult r;
  r.y = empty(Shape{N, T, D * H}, x.dtype(), x.device());
  r.h = empty(Shape{p.num_layers * D, N, H}, x.dtype(), x.device());
  r.c = p.gru ? zeros(Shape{p.num_layers * D, N, H}, x.dtype(), x.device())  // a GRU has none
              : empty(Shape{p.num_layers * D, N, H}, x.dtype(), x.device());
  const ExecContext ctx = current_context();
  // may re-seat r.y
  Tensor saved = kernels<LstmKernels>(x.device()).forward(ctx, kp, xc, wc, r.y, r.h, r.c, grad, seed, offset);
  add_flops(gemm_flops(kp, N, T) + elementwise_flops(kp, N, T, false));
  if (grad) {
    auto n = std::make_shared<LstmBackward>();
    n->p = kp;
    n->ctx = ctx;
    n->x = xc.detach();
    n->w = wc.detach();
    n->y = r.y.detach();
    n->saved = saved;
    n->seed = seed;
    n->offset = offset;
    n->need_x = x.requires_grad();
    n->need_w = w.requires_grad();
    n->two_rounds = n->need_x && n->need_w && kernels<LstmKernels>(x.device()).backward_weights;
    autograd::record(n, {&x, &w}, {&r.y, &r.h, &r.c});
  }
  scope_.result(r.y);
  scope_.result(r.h);
  scope_.result(r.c);
  return r;
}

}  // namespace loupe
