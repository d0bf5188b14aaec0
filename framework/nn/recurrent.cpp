#include "nn/recurrent.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/random.h"
#include "nn/layers.h"
#include "ops/activation.h"
#include "ops/cat.h"
#include "ops/elementwise.h"
#include "ops/gemm_cpu.h"
#include "ops/linalg.h"
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
  if (p.use_bias) bias = register_parameter("bias", zeros(two ? Shape{2, g * u} : Shape{g * u}, DType::f32, kCPU));
}

namespace {
Tensor gate(const Tensor& x, float hard_slope) {
  if (hard_slope == 0) return sigmoid(x);
  const Tensor y = x * double(hard_slope) + 0.5;  // clip(y, 0, 1) = relu(y) - relu(y - 1)
  return relu(y) - relu(y + -1.0);
}

// One step from xw (x W + the input's bias, [N, G u]) and the state h [N, u]; u the recurrent
// kernel [u, G u], b_r the recurrent bias (reset_after) or undefined.
Tensor step(const RnnParams& p, const Tensor& xw, const Tensor& h, const Tensor& u, const Tensor& b_r) {
  const int64_t n = p.units;
  if (p.cell == RnnParams::Cell::Simple) return activation(p.activation, xw + matmul(h, u));
  auto part = [n](const Tensor& t, int k) { return slice(t, 1, k * n, (k + 1) * n); };
  Tensor z, r, candidate;
  if (p.reset_after) {
    Tensor hu = matmul(h, u);
    if (b_r.defined()) hu = hu + b_r;
    z = gate(part(xw, 0) + part(hu, 0), p.hard_slope);
    r = gate(part(xw, 1) + part(hu, 1), p.hard_slope);
    candidate = activation(p.activation, part(xw, 2) + r * part(hu, 2));
  } else {
    const Tensor hu = matmul(h, contiguous(slice(u, 1, 0, 2 * n)));
    z = gate(part(xw, 0) + part(hu, 0), p.hard_slope);
    r = gate(part(xw, 1) + part(hu, 1), p.hard_slope);
    candidate = activation(p.activation, part(xw, 2) + matmul(r * h, contiguous(slice(u, 1, 2 * n, 3 * n))));
  }
  return candidate + z * (h - candidate);  // Keras's z h + (1 - z) candidate
}
}  // namespace

Tensor rnn(const Tensor& x, const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias, const RnnParams& p) {
  const int64_t g = p.gates() * p.units;
  LOUPE_CHECK(x.dim() == 3 && x.size(2) == p.input_size, "rnn: takes [batch, time, ", p.input_size, "], got ",
              x.shape().str());
  LOUPE_CHECK(kernel.shape() == (Shape{p.input_size, g}) && recurrent_kernel.shape() == (Shape{p.units, g}),
              "rnn: the kernels are [in, G u] and [u, G u]");
  const int64_t n = x.size(0), t = x.size(1);
  const bool two = bias.defined() && p.cell == RnnParams::Cell::Gru && p.reset_after;
  const Tensor b_in = two ? reshape(slice(bias, 0, 0, 1), Shape{g}) : bias;
  const Tensor b_r = two ? reshape(slice(bias, 0, 1, 2), Shape{g}) : Tensor();
  // Every step's input product at once: [N T, in] x [in, G u].
  Tensor xw = matmul(reshape(contiguous(x), Shape{n * t, p.input_size}), kernel);
  if (b_in.defined()) xw = xw + b_in;
  xw = reshape(xw, Shape{n, t, g});
  Tensor h = zeros(Shape{n, p.units}, xw.dtype(), xw.device());
  std::vector<Tensor> outputs;
  for (int64_t k = 0; k < t; ++k) {
    const int64_t at = p.go_backwards ? t - 1 - k : k;
    h = step(p, reshape(slice(xw, 1, at, at + 1), Shape{n, g}), h, recurrent_kernel, b_r);
    if (p.return_sequences) outputs.push_back(reshape(h, Shape{n, 1, p.units}));
  }
  if (!p.return_sequences) return h;
  return outputs.size() == 1 ? outputs[0] : cat(outputs, 1);
}

Tensor Recurrent::forward(const Tensor& x) {
  return rnn(autocast(x), autocast(kernel), autocast(recurrent_kernel), bias.defined() ? autocast(bias) : Tensor(), p_);
}

std::string Recurrent::type_name() const {
  std::ostringstream s;
  const bool gru = p_.cell == RnnParams::Cell::Gru;
  s << (gru ? "GRU(" : "SimpleRNN(") << p_.input_size << " -> " << p_.units;
  if (gru) s << (p_.reset_after ? ", reset_after" : ", reset before");
  if (p_.hard_slope > 0) s << ", hard_sigmoid " << p_.hard_slope;
  if (p_.activation == Act::Relu) s << ", relu";
  if (p_.go_backwards) s << ", backwards";
  s << ")";
  return s.str();
}

}  // namespace loupe::nn
