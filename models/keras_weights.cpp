// Keras's variables into loupe's layouts (models/keras_weights.h): each converter takes a layer's
// arrays in Keras's order and shapes and gives the step's tensors by their names.
#include "models/keras_weights.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <optional>

#include "autograd/node.h"
#include "core/error.h"
#include "core/file_check.h"
#include "data/h5.h"
#include "data/isolated.h"
#include "data/npy.h"
#include "models/keras_json.h"
#include "models/keras_layers.h"
#include "ops/lstm/lstm.h"
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

void add_bias(KerasWeights& w, int64_t n) {
  w.names.push_back("bias");
  w.shapes.push_back({n});
  w.paths.push_back("vars/1");
}
}  // namespace

KerasWeights dense_weights(const std::string& layer, int64_t in, int64_t units, bool bias, const std::vector<int64_t>& chw) {
  KerasWeights w{layer, "Dense", {"kernel"}, {{in, units}}, {"vars/0"}, nullptr};
  if (bias) add_bias(w, units);
  w.convert = [in, units, bias, chw](const std::vector<Tensor>& a) {
    Named out{{"weight", transposed(a[0], units, in, chw)}};
    if (bias) out.emplace_back("bias", clone(a[1]));
    return out;
  };
  return w;
}

KerasWeights conv_weights(const std::string& layer, int64_t k, int64_t in, int64_t filters, bool bias) {
  KerasWeights w{layer, "Conv2D", {"kernel"}, {{k, k, in, filters}}, {"vars/0"}, nullptr};
  if (bias) add_bias(w, filters);
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
    if (bias) out.emplace_back("bias", clone(a[1]));
    return out;
  };
  return w;
}

KerasWeights conv1d_weights(const std::string& layer, int64_t k, int64_t in, int64_t filters, bool bias) {
  KerasWeights w{layer, "Conv1D", {"kernel"}, {{k, in, filters}}, {"vars/0"}, nullptr};
  if (bias) add_bias(w, filters);
  w.convert = [k, in, filters, bias](const std::vector<Tensor>& a) {
    // Keras's [k, in, out] to loupe's [out, in, 1, k] (ops' 2-D convolution of a sequence).
    Tensor t = empty(Shape{filters, in, 1, k});
    const float* s = a[0].data<float>();
    float* d = t.data<float>();
    for (int64_t o = 0; o < filters; ++o)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t x = 0; x < k; ++x) d[(o * in + i) * k + x] = s[(x * in + i) * filters + o];
    Named out{{"weight", t}};
    if (bias) out.emplace_back("bias", clone(a[1]));
    return out;
  };
  return w;
}

KerasWeights batch_norm_weights(const std::string& layer, int64_t channels, const std::vector<int64_t>& chw) {
  KerasWeights w{layer, "BatchNormalization", {"gamma", "beta", "moving_mean", "moving_variance"},
                 {{channels}, {channels}, {channels}, {channels}}, {"vars/0", "vars/1", "vars/2", "vars/3"}, nullptr};
  w.convert = [chw](const std::vector<Tensor>& a) {
    return Named{{"weight", permuted_vector(a[0], chw)},
                 {"bias", permuted_vector(a[1], chw)},
                 {"running_mean", permuted_vector(a[2], chw)},
                 {"running_var", permuted_vector(a[3], chw)}};
  };
  return w;
}

KerasWeights embedding_weights(const std::string& layer, int64_t rows, int64_t dim) {
  return {layer, "Embedding", {"embeddings"}, {{rows, dim}}, {"vars/0"},
          [](const std::vector<Tensor>& a) { return Named{{"weight", clone(a[0])}}; }};
}

KerasWeights lstm_weights(const std::string& layer, const std::string& inner, int64_t in, int64_t units, bool bidirectional) {
  KerasWeights w{layer, bidirectional ? "Bidirectional" : "LSTM", {}, {}, {}, nullptr};
  const int dirs = bidirectional ? 2 : 1;
  for (int d = 0; d < dirs; ++d) {
    const std::string prefix = !bidirectional ? "" : (d == 0 ? "forward_" : "backward_") + inner + "/";
    w.names.insert(w.names.end(), {prefix + "kernel", prefix + "recurrent_kernel", prefix + "bias"});
    w.shapes.insert(w.shapes.end(), {{in, 4 * units}, {units, 4 * units}, {4 * units}});
    // Keras 3: the LSTM's cell holds them; a Bidirectional's two copies are its attributes.
    const std::string group = !bidirectional ? "cell/vars/" : d == 0 ? "forward_layer/cell/vars/" : "backward_layer/cell/vars/";
    w.paths.insert(w.paths.end(), {group + "0", group + "1", group + "2"});
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
KerasWeights rnn_weights(const std::string& layer, const std::string& cls, int64_t in, int64_t units, int gates,
                         int64_t bias_rows) {
  KerasWeights w{layer, cls, {"kernel", "recurrent_kernel"}, {{in, gates * units}, {units, gates * units}},
                 {"cell/vars/0", "cell/vars/1"}, nullptr};
  if (bias_rows) {
    w.names.push_back("bias");
    w.shapes.push_back(bias_rows == 1 ? std::vector<int64_t>{gates * units} : std::vector<int64_t>{bias_rows, gates * units});
    w.paths.push_back("cell/vars/2");
  }
  // nn::Recurrent keeps Keras's layouts and names.
  w.convert = [names = w.names](const std::vector<Tensor>& a) {
    Named out;
    for (size_t i = 0; i < a.size(); ++i) out.emplace_back(names[i], clone(a[i]));
    return out;
  };
  return w;
}
KerasWeights bi_rnn_weights(const std::string& layer, const std::string& inner, const std::string& cls, int64_t in,
                            int64_t units, int gates, int64_t bias_rows) {
  const KerasWeights one = rnn_weights(layer, cls, in, units, gates, bias_rows);
  KerasWeights w{layer, "Bidirectional", {}, {}, {}, nullptr};
  for (const char* d : {"forward", "backward"})
    for (size_t i = 0; i < one.names.size(); ++i) {
      w.names.push_back(std::string(d) + "_" + inner + "/" + one.names[i]);
      w.shapes.push_back(one.shapes[i]);
      w.paths.push_back(std::string(d) + "_layer/" + one.paths[i]);  // Keras 3: the wrapper's two layers
    }
  // Each half as one layer's, its tensors under BiRecurrent's "forward." and "backward.".
  w.convert = [convert = one.convert, n = one.names.size()](const std::vector<Tensor>& a) {
    Named out;
    for (size_t d = 0; d < 2; ++d)
      for (auto& [name, t] : convert(std::vector<Tensor>(a.begin() + long(d * n), a.begin() + long((d + 1) * n))))
        out.emplace_back((d == 0 ? "forward." : "backward.") + name, t);
    return out;
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
      arrays.push_back(a.is_contiguous() ? a : clone(a));
    }
    for (const auto& [name, t] : w->convert(arrays)) {
      const auto it = mine.find(step + "." + name);
      LOUPE_CHECK(it != mine.end() && it->second.shape() == t.shape(), "load_keras_weights: the model has no ", step, ".", name,
                  " of the converted shape (built from another file?)");
      copy_(it->second, loupe::to(t, it->second.device()));
    }
  }
}

namespace {
// A variable's own name: "fc1/kernel:0" -> "kernel", "bi/forward_lstm_1/kernel:0" -> "kernel".
std::string last_part(const std::string& n) {
  const size_t slash = n.rfind('/');
  std::string t = slash == std::string::npos ? n : n.substr(slash + 1);
  const size_t colon = t.rfind(':');
  return colon == std::string::npos ? t : t.substr(0, colon);
}

// An attribute of Keras 2's list of names: whole, or, past HDF5's 64 KiB for an object's header,
// in chunks NAME0, NAME1, ... (save_attributes_to_hdf5_group).
std::optional<std::vector<std::string>> keras2_names(data::H5File& f, const std::string& path, const std::string& group,
                                                     const std::string& name) {
  if (auto whole = data::h5_strings(f, group, name)) return whole;
  std::optional<std::vector<std::string>> out;
  for (int k = 0;; ++k) {
    const auto chunk = data::h5_strings(f, group, name + std::to_string(k));
    if (!chunk) return out;
    if (!out) out.emplace();
    if (int64_t(out->size() + chunk->size()) > data::kMaxH5Strings)
      refuse_file(path, "'/" + group + "' lists more than " + std::to_string(data::kMaxH5Strings) + " " + name);
    out->insert(out->end(), chunk->begin(), chunk->end());
  }
}

// Keras 2's and tf.keras's layout: the groups layer_names lists, each with its weight_names.
std::vector<float> keras2_array(data::H5File& f, const std::string& path, const std::string& root, const KerasVariable& v,
                    size_t index, size_t count) {
  const std::string group = root.empty() ? v.layer : root + "/" + v.layer;
  const auto names = keras2_names(f, path, group, "weight_names");
  if (!names) refuse_file(path, "holds no weights for layer '" + keras::cut(v.layer) + "'");
  if (names->size() != count)
    refuse_file(path, "holds " + std::to_string(names->size()) + " weights for layer '" + keras::cut(v.layer) + "' where the model's has " +
                          std::to_string(count));
  const std::string& name = (*names)[index];
  if (last_part(name) != last_part(v.name))
    refuse_file(path, "layer '" + keras::cut(v.layer) + "''s weight " + std::to_string(index + 1) + " is " + keras::cut(name) + " where the model's is " + v.name);
  return data::h5_floats(f, group + "/" + name, v.shape);
}
// keras.src.utils.naming.to_snake_case: "Conv2D" -> "conv2d", "BatchNormalization" ->
// "batch_normalization", "SimpleRNN" -> "simple_rnn".
std::string snake_case(const std::string& cls) {
  std::string out;
  for (size_t i = 0; i < cls.size(); ++i) {
    const auto up = [&](size_t k) { return k < cls.size() && std::isupper(static_cast<unsigned char>(cls[k])); };
    const auto low = [&](size_t k) { return k < cls.size() && std::islower(static_cast<unsigned char>(cls[k])); };
    // A capital that starts a word ("Normalization") or follows a small letter ("eR" in SimpleRNN).
    if (i > 0 && up(i) && (low(i + 1) || low(i - 1))) out += '_';
    out += char(std::tolower(static_cast<unsigned char>(cls[i])));
  }
  return out;
}

using Get = std::function<std::vector<float>(const KerasVariable&)>;

// Each variable's array into `out`, one after the other in keras_variables' order.
void read_each(const ModelInfo& info, const Get& get, float* out) {
  for (const KerasVariable& v : keras_variables(info)) {
    const std::vector<float> a = get(v);
    out = std::copy(a.begin(), a.end(), out);
  }
}

// Keras 3's layout (saving_lib.py): the model's layers under layers/, each group named for its
// class in snake case, numbered from the second of a class on (dense, dense_1, ...; weightless
// layers, a Flatten, a TimeDistributed(MaxPooling2D), take their numbers too), its
// variables at vars/0, vars/1, ... (an LSTM's in its cell/, a Bidirectional's in forward_layer/
// and backward_layer/).
struct Keras3Groups {
  std::map<std::string, int> seen;            // "layers/dense" -> how many layers of the class
  std::map<std::string, std::string> group;   // Keras layer name -> its group
};
Keras3Groups keras3_groups(const ModelInfo& info) {
  Keras3Groups g;
  for (const auto& [cls, name] : info.keras_layers) {  // every layer counts, as saving_lib counts them
    const std::string base = "layers/" + snake_case(cls);
    const int k = g.seen[base]++;
    g.group[name] = k ? base + "_" + std::to_string(k) : base;
  }
  for (const auto& [step, w] : info.keras_weights)
    LOUPE_CHECK(g.group.count(w->layer), "keras3_groups: layer '", w->layer, "' is not among the model's layers");
  return g;
}

void read_keras3(const ModelInfo& info, data::H5File& f, const std::string& path, float* out) {
  const Keras3Groups g = keras3_groups(info);
  const auto& seen = g.seen;
  const auto& group = g.group;
  std::map<std::string, const keras::KerasWeights*> weights;  // Keras layer name -> its variables
  for (const auto& [step, w] : info.keras_weights) {
    weights[w->layer] = w.get();
    if (!data::h5_has(f, group.at(w->layer)))
      refuse_file(path, "has no " + group.at(w->layer) + " for layer '" + keras::cut(w->layer) + "' (" + w->cls + ")");
  }
  for (const auto& [base, n] : seen)
    if (data::h5_has(f, base + "_" + std::to_string(n)))
      refuse_file(path, "holds " + base + "_" + std::to_string(n) + ", a layer more than the model's " + std::to_string(n) + " of its class");
  std::map<std::string, size_t> next;
  read_each(info, [&](const KerasVariable& v) {
    const keras::KerasWeights* w = weights.at(v.layer);
    const size_t i = next[v.layer]++;
    const std::string at = group.at(v.layer) + "/" + w->paths[i];
    // After the last variable of a vars group, Keras refuses a group holding more, and so does loupe.
    const auto dir = [](const std::string& p) { return p.substr(0, p.rfind('/')); };
    if (i + 1 == w->paths.size() || dir(w->paths[i + 1]) != dir(w->paths[i])) {
      const std::string more = group.at(v.layer) + "/" + dir(w->paths[i]) + "/" +
                               std::to_string(std::stoi(w->paths[i].substr(w->paths[i].rfind('/') + 1)) + 1);
      if (data::h5_has(f, more)) refuse_file(path, "holds " + more + ", more variables than layer '" + keras::cut(v.layer) + "' has");
    }
    return data::h5_floats(f, at, v.shape);
  }, out);
}

// The whole file's arrays into `out` (keras_variables' order), every check of the layout made;
// `image`: a .keras file's model.weights.h5 in memory, else the file at `path` is the HDF5 one.
void read_keras_file(const ModelInfo& info, const std::string& path, const std::vector<uint8_t>* image, float* out) {
  auto f = image ? data::open_h5_image(path, *image) : data::open_h5(path);
  const std::string root = data::h5_has(*f, "model_weights") ? "model_weights" : "";
  const auto layers = keras2_names(*f, path, root, "layer_names");
  if (!layers && data::h5_has(*f, "layers")) return read_keras3(info, *f, path, out);
  if (!layers) refuse_file(path, "is HDF5 but not Keras weights (neither Keras 2's layer_names nor Keras 3's layers/)");
  // Keras saves a group for every layer, one without weights holding none: those must match too.
  std::map<std::string, size_t> wanted;
  for (const auto& [step, w] : info.keras_weights) wanted[w->layer] = w->names.size();
  for (const std::string& l : *layers) {
    const auto names = keras2_names(*f, path, root.empty() ? l : root + "/" + l, "weight_names");
    if (names && !names->empty() && !wanted.count(l))
      refuse_file(path, "holds weights for layer '" + keras::cut(l) + "', which the model does not have");
  }
  std::map<std::string, size_t> next;  // each layer's next variable
  read_each(info, [&](const KerasVariable& v) { return keras2_array(*f, path, root, v, next[v.layer]++, wanted[v.layer]); }, out);
}
}  // namespace

// libhdf5 is not hardened against damaged files (a damaged object header can make it read past
// its buffers), so the file is read in a child process (data/isolated.h).
void load_keras_weights_file(nn::Module& model, const ModelInfo& info, const std::string& path) {
  size_t floats = 0;
  for (const KerasVariable& v : keras_variables(info)) floats += size_t(Shape(v.shape).numel());
  // A .keras file's weights, inflated by libzip here: at most what float64 values and an Adam's
  // two moments of them take, and room for HDF5's own structures.
  std::optional<std::vector<uint8_t>> image;
  if (is_keras_archive(path)) {
    image = data::zip_member(path, "model.weights.h5", uint64_t(floats) * 24 + (uint64_t(64) << 20), "a .keras file");
    if (!image) refuse_file(path, "has no model.weights.h5 (a .keras file holds config.json, metadata.json and model.weights.h5)");
  }
  const std::vector<float> all = data::read_in_child(path, "libhdf5", floats, [&](float* out) {
    read_keras_file(info, path, image ? &*image : nullptr, out);
  });
  size_t at = 0;
  load_keras_weights(model, info, [&](const KerasVariable& v) {
    Tensor t = empty(Shape(v.shape));
    std::copy(all.begin() + long(at), all.begin() + long(at + size_t(t.numel())), t.data<float>());
    at += size_t(t.numel());
    return t;
  });
}

namespace {
// A layer's variables, each element holding its index in the layer (the variables one after the
// other) in base 4096: digit `place` (0 the low one) plus 1, so that 0 marks a loupe element that
// no Keras element sets. Exact in float32 for layers of up to 2^36 elements.
std::vector<Tensor> coded(const keras::KerasWeights& w, int place) {
  std::vector<Tensor> out;
  int64_t k = 0;
  for (const auto& shape : w.shapes) {
    Tensor t = empty(Shape(shape));
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i, ++k) p[i] = float((place ? k >> 12 : k & 4095) + 1);
    out.push_back(t);
  }
  return out;
}

Tensor host_f32(const Tensor& t) { return contiguous(loupe::to(loupe::to(t, kCPU), DType::f32)); }

// Layer `w`'s Keras arrays from loupe's tensors `mine` (by name): each converter reads every Keras
// element into one place or more, found by converting the coded variables.
std::vector<Tensor> layer_arrays(const std::string& step, const keras::KerasWeights& w, const std::map<std::string, Tensor>& mine) {
  std::vector<Tensor> arrays;
  std::vector<float*> starts;
  std::vector<int64_t> ends;  // each variable's end in the layer's index
  for (const auto& shape : w.shapes) {
    arrays.push_back(zeros(Shape(shape)));
    starts.push_back(arrays.back().data<float>());
    ends.push_back((ends.empty() ? 0 : ends.back()) + arrays.back().numel());
  }
  std::vector<uint8_t> set(size_t(ends.empty() ? 0 : ends.back()), 0);
  const auto lo = w.convert(coded(w, 0)), hi = w.convert(coded(w, 1));
  std::vector<Tensor> held;  // loupe's tensors on the host, in the converter's order
  for (const auto& [name, t] : lo) held.push_back(host_f32(mine.at(step + "." + name)));
  for (size_t j = 0; j < lo.size(); ++j) {
    const Tensor& v = held[j];
    const float *a = lo[j].second.data<float>(), *b = hi[j].second.data<float>(), *x = v.data<float>();
    for (int64_t e = 0; e < v.numel(); ++e) {
      if (a[e] == 0 && b[e] == 0) continue;
      const int64_t k = (int64_t(b[e]) - 1) * 4096 + int64_t(a[e]) - 1;
      LOUPE_CHECK(k >= 0 && k < int64_t(set.size()), "keras_arrays: layer ", w.layer, "'s converter is not a selection");
      const size_t var = size_t(std::upper_bound(ends.begin(), ends.end(), k) - ends.begin());
      starts[var][k - (var ? ends[var - 1] : 0)] = x[e];
      set[size_t(k)] = 1;
    }
  }
  for (size_t var = 0; var < arrays.size(); ++var)
    for (int64_t k = var ? ends[var - 1] : 0; k < ends[var]; ++k)
      if (!set[size_t(k)]) throw Error("layer '" + keras::cut(w.layer) + "': loupe holds no value of Keras's " + w.names[var]);
  // Loading them back must give loupe's tensors, the places no Keras element sets included.
  const auto again = w.convert(arrays);  // the converter gives its tensors in one order
  for (size_t j = 0; j < again.size(); ++j)
    if (held.at(j).to_vector<float>() != again[j].second.to_vector<float>())
      throw Error("layer '" + keras::cut(w.layer) + "': loupe's " + again[j].first + " holds what Keras's variables cannot " +
                  "(a second bias, as cuDNN's LSTM has: the reference models' layout)");
  return arrays;
}
}  // namespace

std::vector<Tensor> keras_arrays(nn::Module& model, const ModelInfo& info) {
  std::map<std::string, Tensor> mine;
  for (const auto& [n, t] : model.named_parameters()) mine[n] = t;
  for (const auto& [n, t] : model.named_buffers()) mine[n] = t;
  std::vector<Tensor> out;
  NoGradGuard no_grad;
  for (const auto& [step, w] : info.keras_weights)
    for (Tensor& a : layer_arrays(step, *w, mine)) out.push_back(std::move(a));
  return out;
}

void check_keras_savable(const ModelInfo& info, const std::string& what) {
  if (info.keras_config.empty() || info.keras_weights.empty())
    throw Error(what + ": " + info.name + " is not a model file with weights; a .keras file is written for a model "
                "read from its Keras file (.json, .keras)");
}

void save_keras_file(nn::Module& model, const ModelInfo& info, const std::string& path) {
  check_keras_savable(info, path);
  const std::vector<Tensor> arrays = keras_arrays(model, info);
  const Keras3Groups g = keras3_groups(info);
  std::vector<data::H5Array> h5;
  // The root's vars/ group, the model's own variables (none), which Keras 3's loader reads; the
  // optimizer's state is not written.
  std::vector<std::string> groups{"vars"};
  size_t k = 0;
  for (const auto& [step, w] : info.keras_weights)
    for (size_t i = 0; i < w->names.size(); ++i, ++k)
      h5.push_back({g.group.at(w->layer) + "/" + w->paths[i], w->shapes[i], arrays[k].data<float>()});
  const std::vector<uint8_t> weights = data::h5_image_of(groups, h5);
  // The Keras 3 the file is from (a Keras 3 config names no version: 3.0.0, the first).
  const keras::json config = keras::json::parse(info.keras_config);
  std::string version = "3.0.0";
  if (config.contains("keras_version") && config.at("keras_version").is_string() &&
      config.at("keras_version").get<std::string>().rfind("3.", 0) == 0)
    version = config.at("keras_version").get<std::string>();
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", std::localtime(&now));
  const std::string meta = keras::json{{"keras_version", version}, {"date_saved", date}, {"written_by", "loupe"}}.dump();
  const auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  data::write_zip(path, {{"metadata.json", bytes(meta)}, {"config.json", bytes(info.keras_config)}, {"model.weights.h5", weights}});
}

}  // namespace loupe::models
