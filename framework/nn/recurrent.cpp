#include "nn/recurrent.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/random.h"
#include "nn/layers.h"
#include "ops/activation.h"
#include "ops/cat.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/elementwise.h"
#include "ops/backend/gemm_cpu.h"
#include "ops/linalg.h"
#include "ops/lstm/lstm.h"
#include "ops/view.h"

namespace loupe::nn {

namespace {
// Gram-Schmidt, twice per column for accuracy, on the column-major q [rows, cols]: the orthogonal
// initialiser's fallback without LAPACK (it yields the same Q as the Householder QR below).
void gram_schmidt(std::vector<double>& q, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    double* v = &q[size_t(j * rows)];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        const double* u = &q[size_t(k * rows)];
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += u[i] * v[i];
        for (int64_t i = 0; i < rows; ++i) v[i] -= dot * u[i];
      }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += v[i] * v[i];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < rows; ++i) v[i] /= norm;
  }
}

// Fills r [rows, cols] (rows >= cols, row-major) with the Q of the QR decomposition of a standard
// normal matrix (Box-Muller from the default generator) whose R has a positive diagonal: the
// sign-fixed Q that Keras uses. LAPACK's Householder QR where the build has it (a 2,048-unit LSTM's
// [8192, 2048] block took about a minute by Gram-Schmidt, which is cubic and scalar).
void orthogonal_(float* r, int64_t rows, int64_t cols) {
  LOUPE_CHECK(rows >= cols, "orthogonal_: needs rows >= cols");
  Generator& g = default_generator();
  uint64_t off = g.take(uint64_t(2 * rows * cols));
  std::vector<double> q(size_t(rows * cols));  // column-major: column j at q[j * rows]
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      uint64_t e = uint64_t(2 * (i * cols + j));
      double u1 = 1.0 - philox_uniform(g.seed, off, e), u2 = philox_uniform(g.seed, off, e + 1);  // u1 in (0, 1]
      q[size_t(j * rows + i)] = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
  if (!cpu::lapack_orthonormalize(q.data(), rows, cols)) gram_schmidt(q, rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r[i * cols + j] = float(q[size_t(j * rows + i)]);
}
}  // namespace

LSTM::LSTM(int64_t input_size, int64_t hidden, int num_layers, bool bidirectional, double dropout)
    : LSTM(LstmParams{input_size, hidden, num_layers, bidirectional, dropout}) {}

LSTM::LSTM(const LstmParams& p) : params_(p) {
  const int64_t input_size = p.input_size, hidden = p.hidden_size;
  const int num_layers = p.num_layers;
  LOUPE_CHECK(input_size > 0 && hidden > 0 && num_layers > 0, "LSTM: sizes and layer count must be positive");
  LOUPE_CHECK(p.dropout >= 0 && p.dropout < 1, "LSTM: dropout must be in [0, 1), got ", p.dropout);
  LOUPE_CHECK(p.hard_slope >= 0 && p.hard_slope <= 1, "LSTM: hard_slope must be in [0, 1], got ", p.hard_slope);
  Tensor w = zeros(Shape{lstm_weight_count(params_)}, DType::f32, kCPU);
  const int64_t H = hidden;
  for (int l = 0; l < num_layers; ++l)
    for (int d = 0; d < params_.directions(); ++d) {
      LstmLayerOffsets o = lstm_layer_offsets(params_, l, d);
      glorot_uniform_(slice(w, 0, o.w, o.w + 4 * H * o.in), o.in, 4 * H);
      orthogonal_(w.data<float>() + o.r, 4 * H, H);
      float* b = w.data<float>() + o.b_w;
      for (int64_t k = H; k < 2 * H; ++k) b[k] = 1;  // the forget gate's block
    }
  weight = register_parameter("weight", w);
}

int64_t LSTM::fixed_elements() const {
  return params_.single_bias ? int64_t(params_.num_layers) * params_.directions() * 4 * params_.hidden_size : 0;
}

LstmResult LSTM::run(const Tensor& x) { return lstm(autocast(x), autocast(weight), params_, is_training()); }

std::string LSTM::type_name() const {
  std::ostringstream s;
  s << "LSTM(" << params_.input_size << " -> " << params_.hidden_size << ", " << params_.num_layers
    << (params_.num_layers == 1 ? " layer" : " layers");
  if (params_.bidirectional) s << ", bidirectional";
  if (params_.dropout > 0) s << ", dropout " << params_.dropout;
  if (params_.hard_slope > 0) s << ", hard_sigmoid " << params_.hard_slope;
  if (params_.single_bias) s << ", one bias";
  s << ")";
  return s.str();
}

Recurrent::Recurrent(const RnnParams& p) : p_(p) {
  LOUPE_CHECK(p.input_size > 0 && p.units > 0, "Recurrent: sizes must be positive");
  LOUPE_CHECK(p.hard_slope >= 0 && p.hard_slope <= 1, "Recurrent: hard_slope must be in [0, 1], got ", p.hard_slope);
  LOUPE_CHECK(p.activation == Act::Tanh || p.activation == Act::Relu, "Recurrent: the activation is tanh or relu");
  LOUPE_CHECK(p.dropout >= 0 && p.dropout < 1 && p.recurrent_dropout >= 0 && p.recurrent_dropout < 1,
              "Recurrent: dropout rates are in [0, 1)");
  const int64_t g = p.gates(), u = p.units;
  Tensor k = empty(Shape{p.input_size, g * u}, DType::f32, kCPU);
  glorot_uniform_(k, p.input_size, g * u);
  kernel = register_parameter("kernel", k);
  // Keras's orthogonal for [u, G u]: the Q of a [G u, u] normal matrix, transposed.
  std::vector<float> q(size_t(g * u * u));
  orthogonal_(q.data(), g * u, u);
  Tensor r = empty(Shape{u, g * u}, DType::f32, kCPU);
  float* rp = r.data<float>();
  for (int64_t i = 0; i < g * u; ++i)
    for (int64_t j = 0; j < u; ++j) rp[j * g * u + i] = q[size_t(i * u + j)];
  recurrent_kernel = register_parameter("recurrent_kernel", r);
  const bool two = p.cell == RnnParams::Cell::Gru && p.reset_after;
  Tensor b = zeros(two ? Shape{2, g * u} : Shape{g * u}, DType::f32, kCPU);
  if (p.cell == RnnParams::Cell::Lstm)
    for (int64_t k = u; k < 2 * u; ++k) b.data<float>()[k] = 1;  // Keras's unit_forget_bias
  if (p.use_bias) bias = register_parameter("bias", b);
}

namespace {
Tensor gate(const Tensor& x, float hard_slope) {
  if (hard_slope == 0) return sigmoid(x);
  const Tensor y = x * double(hard_slope) + 0.5;  // clip(y, 0, 1) = relu(y) - relu(y - 1)
  return relu(y) - relu(y + -1.0);
}

// What every step reads: the recurrent kernel whole and by gate, the recurrent bias (a GRU's with
// reset_after), and the recurrent dropout's masks (none, or one per gate, drawn once a sequence).
struct Recurrence {
  const RnnParams& p;
  Tensor u, b_r;
  std::vector<Tensor> u_gate, b_gate, masks;
  Tensor part(const Tensor& t, int64_t k) const { return slice(t, 1, k * p.units, (k + 1) * p.units); }
  // Gate k's recurrent product (and bias) from h; `whole` is h U (+ b_r) where no mask applies.
  Tensor product(const Tensor& h, const Tensor& whole, int64_t k) const {
    if (masks.empty()) return part(whole, k);
    Tensor y = matmul(h * masks[size_t(k)], u_gate[size_t(k)]);
    return b_gate.empty() ? y : y + b_gate[size_t(k)];
  }
};

struct State {
  Tensor h, c;  // c: an LSTM's carry
};

// One step from xw (x W + the input's bias, [N, G u]) and the state.
State step(const Recurrence& r, const Tensor& xw, const State& s) {
  const RnnParams& p = r.p;
  const Tensor& h = s.h;
  const bool fused = r.masks.empty();
  if (p.cell == RnnParams::Cell::Simple) {
    const Tensor hm = fused ? h : h * r.masks[0];
    return {activation(p.activation, xw + matmul(hm, r.u)), Tensor()};
  }
  if (p.cell == RnnParams::Cell::Lstm) {  // Keras's gates i, f, c, o
    Tensor whole = fused ? matmul(h, r.u) : Tensor();
    if (fused && r.b_r.defined()) whole = whole + r.b_r;
    auto z = [&](int64_t k) { return r.part(xw, k) + r.product(h, whole, k); };
    const Tensor c = gate(z(1), p.hard_slope) * s.c + gate(z(0), p.hard_slope) * activation(p.activation, z(2));
    return {gate(z(3), p.hard_slope) * activation(p.activation, c), c};
  }
  Tensor whole;
  if (fused) whole = p.reset_after ? matmul(h, r.u) : matmul(h, contiguous(slice(r.u, 1, 0, 2 * p.units)));
  if (fused && p.reset_after && r.b_r.defined()) whole = whole + r.b_r;
  const Tensor z = gate(r.part(xw, 0) + r.product(h, whole, 0), p.hard_slope);
  const Tensor reset = gate(r.part(xw, 1) + r.product(h, whole, 1), p.hard_slope);
  Tensor candidate;
  if (p.reset_after) {
    candidate = activation(p.activation, r.part(xw, 2) + reset * r.product(h, whole, 2));
  } else {
    const Tensor hm = fused ? h : h * r.masks[2];
    candidate = activation(p.activation, r.part(xw, 2) + matmul(reset * hm, r.u_gate[2]));
  }
  return {candidate + z * (h - candidate), Tensor()};  // Keras's z h + (1 - z) candidate
}

// Keras's dropout masks of a sequence: one per gate where Keras draws one per gate (its
// implementation 1: Keras 2's default, Keras 3's with recurrent dropout), else one for all; each
// 0 or 1 / (1 - rate), the same at every step.
std::vector<Tensor> masks(const RnnParams& p, double rate, const Shape& s, DType dt, Device d, bool training) {
  if (!training || rate <= 0) return {};
  const int64_t count = p.mask_per_gate ? p.gates() : 1;
  std::vector<Tensor> out;
  for (int64_t k = 0; k < count; ++k) out.push_back(dropout(ones(s, dt, d), rate, true));
  while (int64_t(out.size()) < p.gates()) out.push_back(out[0]);
  return out;
}

// Every step's input product at once, [N, T, G u]: x W, gate by gate where each has its mask.
Tensor input_products(const Tensor& x, const Tensor& kernel, const Tensor& b_in, const RnnParams& p, bool training) {
  const int64_t n = x.size(0), t = x.size(1), g = p.gates() * p.units;
  const std::vector<Tensor> m = masks(p, p.dropout, Shape{n, 1, p.input_size}, x.dtype(), x.device(), training);
  auto product = [&](const Tensor& in, const Tensor& w) { return matmul(reshape(contiguous(in), Shape{n * t, p.input_size}), w); };
  Tensor xw;
  if (m.empty() || !p.mask_per_gate) {
    xw = product(m.empty() ? x : x * m[0], kernel);
  } else {
    std::vector<Tensor> parts;
    for (int64_t k = 0; k < p.gates(); ++k)
      parts.push_back(product(x * m[size_t(k)], contiguous(slice(kernel, 1, k * p.units, (k + 1) * p.units))));
    xw = cat(parts, 1);
  }
  if (b_in.defined()) xw = xw + b_in;
  return reshape(xw, Shape{n, t, g});
}
}  // namespace

Tensor rnn(const Tensor& x, const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias, const RnnParams& p,
           bool training, const Tensor& mask) {
  return rnn_states(x, kernel, recurrent_kernel, bias, p, training, mask).y;
}

RnnResult rnn_states(const Tensor& x, const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias,
                     const RnnParams& p, bool training, const Tensor& mask, const std::vector<Tensor>& initial) {
  const int64_t g = p.gates() * p.units;
  LOUPE_CHECK(x.dim() == 3 && x.size(2) == p.input_size, "rnn: takes [batch, time, ", p.input_size, "], got ",
              x.shape().str());
  LOUPE_CHECK(kernel.shape() == (Shape{p.input_size, g}) && recurrent_kernel.shape() == (Shape{p.units, g}),
              "rnn: the kernels are [in, G u] and [u, G u]");
  const int64_t n = x.size(0), t = x.size(1);
  const bool two = bias.defined() && p.cell == RnnParams::Cell::Gru && p.reset_after;
  const Tensor b_in = two ? reshape(slice(bias, 0, 0, 1), Shape{g}) : bias;
  Recurrence r{p, recurrent_kernel, two ? reshape(slice(bias, 0, 1, 2), Shape{g}) : Tensor(), {}, {}, {}};
  const Tensor xw = input_products(x, kernel, b_in, p, training);
  r.masks = masks(p, p.recurrent_dropout, Shape{n, p.units}, xw.dtype(), xw.device(), training);
  const bool gru_before = p.cell == RnnParams::Cell::Gru && !p.reset_after;
  if (!r.masks.empty() || gru_before)
    for (int64_t k = 0; k < p.gates(); ++k) {
      r.u_gate.push_back(contiguous(slice(recurrent_kernel, 1, k * p.units, (k + 1) * p.units)));
      if (r.b_r.defined()) r.b_gate.push_back(slice(r.b_r, 0, k * p.units, (k + 1) * p.units));
    }
  LOUPE_CHECK(initial.empty() || int(initial.size()) == p.states(), "rnn: the initial states are ", p.states(), ", got ",
              initial.size());
  for (const Tensor& i : initial)
    LOUPE_CHECK(i.shape() == (Shape{n, p.units}), "rnn: an initial state is [batch, units] = [", n, ", ", p.units,
                "], got ", i.shape().str());
  State s;
  if (!initial.empty()) {
    s = {loupe::to(initial[0], xw.dtype()), p.states() == 2 ? loupe::to(initial[1], xw.dtype()) : Tensor()};
  } else {
    s.h = zeros(Shape{n, p.units}, xw.dtype(), xw.device());
    if (p.cell == RnnParams::Cell::Lstm) s.c = s.h;
  }
  LOUPE_CHECK(!mask.defined() || mask.shape() == (Shape{n, t}), "rnn: the mask is [batch, time] = [", n, ", ", t, "], got ",
              mask.shape().str());
  const Tensor kept = mask.defined() ? loupe::to(mask, xw.dtype()) : Tensor();
  std::vector<Tensor> outputs;
  for (int64_t k = 0; k < t; ++k) {
    const int64_t at = p.go_backwards ? t - 1 - k : k;
    State next = step(r, reshape(slice(xw, 1, at, at + 1), Shape{n, g}), s);
    if (kept.defined()) {  // a skipped step keeps the state: s + m (next - s)
      const Tensor m = reshape(contiguous(slice(kept, 1, at, at + 1)), Shape{n, 1});
      next.h = s.h + m * (next.h - s.h);
      if (next.c.defined()) next.c = s.c + m * (next.c - s.c);
    }
    s = next;
    if (p.return_sequences) outputs.push_back(reshape(s.h, Shape{n, 1, p.units}));
  }
  if (!p.return_sequences) return {s.h, s.h, s.c};
  if (p.go_backwards && p.time_order) std::reverse(outputs.begin(), outputs.end());
  return {outputs.size() == 1 ? outputs[0] : cat(outputs, 1), s.h, s.c};
}

Tensor Recurrent::forward(const Tensor& x) { return forward_many({x}); }

bool cudnn_gru(const RnnParams& p, const Tensor& x, bool masked) {
  return x.device().is_cuda() && p.cell == RnnParams::Cell::Gru && p.reset_after && p.hard_slope == 0 &&
         p.activation == Act::Tanh && p.use_bias && p.dropout == 0 && p.recurrent_dropout == 0 && !masked &&
         !p.initial_state;
}

bool Recurrent::takes(size_t n) const {
  const size_t first = 1 + (p_.initial_state ? size_t(p_.states()) : 0);
  return n == first || n == first + 1;
}

namespace {
// Keras's GRU tensors (gates z, r, h; kernel [in, 3u], recurrent_kernel [u, 3u], bias [2, 3u]) as
// cuDNN's flat weights (ops/lstm/lstm.h: W [3u, in], R [3u, u], b_W, b_R, gates r, z, n), through
// differentiable ops: the gradient reaches Keras's tensors.
Tensor cudnn_gru_weights(const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias, int64_t u) {
  auto gates = [u](const Tensor& t, int dim) {  // z, r, h -> r, z, h along dim
    return cat({slice(t, dim, u, 2 * u), slice(t, dim, 0, u), slice(t, dim, 2 * u, 3 * u)}, dim);
  };
  auto flat = [](const Tensor& t) { return reshape(contiguous(t), Shape{t.numel()}); };
  return cat({flat(gates(transpose(kernel, 0, 1), 0)), flat(gates(transpose(recurrent_kernel, 0, 1), 0)),
              flat(gates(bias, 1))},
             0);
}
}  // namespace

std::vector<Tensor> Recurrent::forward_outputs(const std::vector<Tensor>& xs) {
  LOUPE_CHECK(takes(xs.size()), type_name(), " reads a sequence", p_.initial_state ? ", its initial states" : "",
              " and, at most, its mask; got ", xs.size(), " inputs");
  const Tensor x = autocast(xs[0]);
  const size_t states = p_.initial_state ? size_t(p_.states()) : 0;
  const bool masked = xs.size() == 2 + states;
  if (cudnn_gru(p_, x, masked)) return cudnn_forward(x);
  const std::vector<Tensor> initial(xs.begin() + 1, xs.begin() + 1 + long(states));
  const RnnResult r = rnn_states(x, autocast(kernel), autocast(recurrent_kernel), bias.defined() ? autocast(bias) : Tensor(),
                                 p_, is_training(), masked ? xs.back() : Tensor(), initial);
  if (!p_.return_state) return {r.y};
  if (p_.states() == 1) return {r.y, r.h};
  return {r.y, r.h, r.c};
}

std::vector<Tensor> Recurrent::cudnn_forward(const Tensor& x) {
  LstmParams lp;
  lp.input_size = p_.input_size;
  lp.hidden_size = p_.units;
  lp.gru = true;
  // cuDNN runs its bfloat16 GRU step by step; its float32 one is faster inside a bfloat16 step
  // (docs/keras.md, "Recurrent layers"). float16's is its own.
  const bool f32 = x.dtype() == DType::bf16;
  Tensor in = f32 ? loupe::to(x, DType::f32) : x;
  if (p_.go_backwards) in = flip_time(in);  // its outputs then come in the order processed, as Keras's
  auto weight = [&](const Tensor& t) { return f32 ? t : autocast(t); };  // float32 ones as they are
  const LstmResult r =
      lstm(in, cudnn_gru_weights(weight(kernel), weight(recurrent_kernel), weight(bias), p_.units), lp, is_training());
  const Tensor h = reshape(r.h, Shape{x.size(0), p_.units});
  Tensor y = p_.return_sequences ? r.y : h;
  if (p_.return_sequences && p_.go_backwards && p_.time_order) y = flip_time(y);
  auto back = [&](const Tensor& t) { return f32 ? loupe::to(t, x.dtype()) : t; };
  if (p_.return_state) return {back(y), back(h)};
  return {back(y)};
}

// x [N, T, F] with its steps in reverse order: the rows of [T, N F] gathered by an embedding
// lookup (whose backward scatters the gradient back), the ids made once per length on x's device,
// outside any CUDA graph capture (the first, eager steps make them).
Tensor Recurrent::flip_time(const Tensor& x) {
  const int64_t n = x.size(0), t = x.size(1), f = x.size(2);
  Tensor& ids = flip_ids_[t];
  if (!ids.defined() || ids.device() != x.device()) {
    std::vector<int32_t> v(static_cast<size_t>(t));
    for (int64_t k = 0; k < t; ++k) v[size_t(k)] = int32_t(t - 1 - k);
    ids = from_vector(v, Shape{t}, x.device());
  }
  const Tensor rows = embedding(ids, reshape(contiguous(transpose(x, 0, 1)), Shape{t, n * f}));
  return contiguous(transpose(reshape(rows, Shape{t, n, f}), 0, 1));
}

std::string Recurrent::type_name() const {
  std::ostringstream s;
  const bool gru = p_.cell == RnnParams::Cell::Gru;
  s << (gru ? "GRU(" : p_.cell == RnnParams::Cell::Lstm ? "LSTM(" : "SimpleRNN(") << p_.input_size << " -> " << p_.units;
  if (gru) s << (p_.reset_after ? ", reset_after" : ", reset before");
  if (p_.hard_slope > 0) s << ", hard_sigmoid " << p_.hard_slope;
  if (p_.activation == Act::Relu) s << ", relu";
  if (p_.go_backwards) s << ", backwards";
  if (p_.initial_state) s << ", initial state";
  if (p_.return_state) s << ", returns its state";
  if (p_.dropout > 0 || p_.recurrent_dropout > 0) s << ", dropout " << p_.dropout << "/" << p_.recurrent_dropout;
  s << ")";
  return s.str();
}

}  // namespace loupe::nn
