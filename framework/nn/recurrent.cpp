#include "nn/recurrent.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/random.h"
#include "nn/layers.h"
#include "ops/gemm_cpu.h"
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

}  // namespace loupe::nn
