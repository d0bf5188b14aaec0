// Keras's variables into loupe's layouts (models/keras_weights.h): each converter takes a layer's
// arrays in Keras's order and shapes and gives the step's tensors by their names.
#include "models/keras_weights.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "models/keras_layers.h"
#include "ops/lstm.h"
#include "ops/view.h"

namespace loupe::models {
namespace keras {
namespace {
using Named = std::vector<std::pair<std::string, Tensor>>;

// Where loupe's input j of a flattened channels-first image comes from in Keras's pixel-by-pixel
// order: j = (c * H + h) * W + w is Keras's (h * W + w) * C + c. The identity without an image.
int64_t keras_index(int64_t j, const std::vector<int64_t>& chw) {
  if (chw.empty()) return j;
  const int64_t C = chw[0], H = chw[1], W = chw[2];
  const int64_t c = j / (H * W), h = j / W % H, w = j % W;
  return (h * W + w) * C + c;
}

// A [rows, cols] float32 CPU tensor from the [cols, rows] array `a` transposed: t[r][c] = a[c][r].
Tensor transposed(const Tensor& a, int64_t rows, int64_t cols, const std::vector<int64_t>& chw = {}) {
  Tensor t = empty(Shape{rows, cols});
  const float* s = a.data<float>();
  float* d = t.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d[r * cols + c] = s[keras_index(c, chw) * rows + r];
  return t;
}

Tensor permuted_vector(const Tensor& a, const std::vector<int64_t>& chw) {
  Tensor t = empty(Shape{a.numel()});
  for (int64_t j = 0; j < a.numel(); ++j) t.data<float>()[j] = a.data<float>()[keras_index(j, chw)];
  return t;
}

}  // namespace

Tensor copied(const Tensor& a) {
  Tensor t = empty(a.shape());
  copy_(t, a);
  return t;
}

KerasWeights dense_weights(const std::string& layer, int64_t in, int64_t units, bool bias, const std::vector<int64_t>& chw) {
  KerasWeights w{layer, {"kernel"}, {{in, units}}, nullptr};
  if (bias) {
    w.names.push_back("bias");
    w.shapes.push_back({units});
  }
  w.convert = [in, units, bias, chw](const std::vector<Tensor>& a) {
    Named out{{"weight", transposed(a[0], units, in, chw)}};
    if (bias) out.emplace_back("bias", copied(a[1]));
    return out;
  };
  return w;
}

KerasWeights conv_weights(const std::string& layer, int64_t k, int64_t in, int64_t filters, bool bias) {
  KerasWeights w{layer, {"kernel"}, {{k, k, in, filters}}, nullptr};
  if (bias) {
    w.names.push_back("bias");
    w.shapes.push_back({filters});
  }
  w.convert = [k, in, filters, bias](const std::vector<Tensor>& a) {
    // Keras's [kh, kw, in, out] to loupe's (cuDNN's, PyTorch's) [out, in, kh, kw].
    Tensor t = empty(Shape{filters, in, k, k});
    const float* s = a[0].data<float>();
    float* d = t.data<float>();
    for (int64_t o = 0; o < filters; ++o)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t y = 0; y < k; ++y)
          for (int64_t x = 0; x < k; ++x) d[((o * in + i) * k + y) * k + x] = s[((y * k + x) * in + i) * filters + o];
    Named out{{"weight", t}};
    if (bias) out.emplace_back("bias", copied(a[1]));
    return out;
  };
  return w;
}

KerasWeights batch_norm_weights(const std::string& layer, int64_t channels, const std::vector<int64_t>& chw) {
  KerasWeights w{layer, {"gamma", "beta", "moving_mean", "moving_variance"}, {{channels}, {channels}, {channels}, {channels}}, nullptr};
  w.convert = [chw](const std::vector<Tensor>& a) {
    return Named{{"weight", permuted_vector(a[0], chw)},
                 {"bias", permuted_vector(a[1], chw)},
                 {"running_mean", permuted_vector(a[2], chw)},
                 {"running_var", permuted_vector(a[3], chw)}};
  };
  return w;
}

KerasWeights embedding_weights(const std::string& layer, int64_t rows, int64_t dim) {
  return {layer, {"embeddings"}, {{rows, dim}}, [](const std::vector<Tensor>& a) { return Named{{"weight", copied(a[0])}}; }};
}

KerasWeights lstm_weights(const std::string& layer, const std::string& inner, int64_t in, int64_t units, bool bidirectional) {
  KerasWeights w{layer, {}, {}, nullptr};
  const int dirs = bidirectional ? 2 : 1;
  for (int d = 0; d < dirs; ++d) {
    const std::string prefix = !bidirectional ? "" : (d == 0 ? "forward_" : "backward_") + inner + "/";
    w.names.insert(w.names.end(), {prefix + "kernel", prefix + "recurrent_kernel", prefix + "bias"});
    w.shapes.insert(w.shapes.end(), {{in, 4 * units}, {units, 4 * units}, {4 * units}});
  }
  w.convert = [in, units, bidirectional, dirs](const std::vector<Tensor>& a) {
    LstmParams p;
    p.input_size = in;
    p.hidden_size = units;
    p.bidirectional = bidirectional;
    Tensor flat = zeros(Shape{lstm_weight_count(p)});
    float* f = flat.data<float>();
    // Keras's gates are in cuDNN's order (i, f, c, o): the kernels transpose into W and R, the one
    // bias is b_W, and b_R stays zero (their sum is Keras's bias).
    for (int d = 0; d < dirs; ++d) {
      const LstmLayerOffsets o = lstm_layer_offsets(p, 0, d);
      const Tensor W = transposed(a[3 * d], 4 * units, in), R = transposed(a[3 * d + 1], 4 * units, units);
      std::copy(W.data<float>(), W.data<float>() + W.numel(), f + o.w);
      std::copy(R.data<float>(), R.data<float>() + R.numel(), f + o.r);
      std::copy(a[3 * d + 2].data<float>(), a[3 * d + 2].data<float>() + 4 * units, f + o.b_w);
    }
    return Named{{"weight", flat}};
  };
  return w;
}
}  // namespace keras

std::vector<KerasVariable> keras_variables(const ModelInfo& info) {
  std::vector<KerasVariable> out;
  for (const auto& [step, w] : info.keras_weights)
    for (size_t i = 0; i < w->names.size(); ++i) out.push_back({w->layer, w->names[i], w->shapes[i]});
  return out;
}

void load_keras_weights(nn::Module& model, const ModelInfo& info, const std::function<Tensor(const KerasVariable&)>& get) {
  std::map<std::string, Tensor> mine;
  for (const auto& [n, t] : model.named_parameters()) mine[n] = t;
  for (const auto& [n, t] : model.named_buffers()) mine[n] = t;
  for (const auto& [step, w] : info.keras_weights) {
    std::vector<Tensor> arrays;
    for (size_t i = 0; i < w->names.size(); ++i) {
      const KerasVariable v{w->layer, w->names[i], w->shapes[i]};
      Tensor a = get(v);
      const Shape want(v.shape);
      if (a.dtype() != DType::f32 || a.device().is_cuda() || a.shape() != want)
        throw Error("layer '" + keras::cut(w->layer) + "': its weight " + keras::cut(v.name) + " is " + dims_text(a.shape().vec()) +
                    " " + dtype_name(a.dtype()) + "; the model's is " + dims_text(v.shape) + " float32");
      arrays.push_back(a.is_contiguous() ? a : keras::copied(a));
    }
    for (const auto& [name, t] : w->convert(arrays)) {
      const auto it = mine.find(step + "." + name);
      LOUPE_CHECK(it != mine.end() && it->second.shape() == t.shape(), "load_keras_weights: the model has no ", step, ".", name,
                  " of the converted shape (built from another file?)");
      copy_(it->second, loupe::to(t, it->second.device()));
    }
  }
}

}  // namespace loupe::models
