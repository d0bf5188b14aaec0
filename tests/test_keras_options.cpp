// Keras model files (models/keras_json.h) as users write them: each option the reader takes or
// refuses, in a crafted file of its own, against Keras's rules (docs/keras.md, "What is refused").
// The reference models' own files are test_keras_json's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "models/session.h"
#include "nn/graph.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "optim/optimizer.h"
#include "train/trainer.h"
#include "keras_test.h"

using namespace loupe;
using json = nlohmann::json;

// The six reference files use few of the reader's options (no stride, no use_bias false, no
// BatchNormalization, no return_sequences into another layer, no hidden softmax to refuse), so each
// option has a file of its own here, as Keras 3's model.to_json() writes it (the keys the reader
// looks at), built and run for one batch forward and backward. Keras's figures are computed here
// from its published rules: output sizes ('valid': floor((in - k) / s) + 1, 'same': ceil(in / s))
// and parameter counts; loupe's count differs where docs/keras.md says (BatchNormalization's
// moving statistics are buffers).
namespace {
json layer(const std::string& cls, const std::string& name, json config = json::object()) {
  config["name"] = name;
  return {{"module", "keras.layers"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr}};
}
json input(const std::vector<int64_t>& shape) {
  json s = json::array({nullptr});
  for (int64_t d : shape) s.push_back(d);
  return layer("InputLayer", "input_layer", {{"batch_shape", s}, {"dtype", "float32"}});
}
json dense(const std::string& name, int64_t units, const std::string& act = "linear", bool bias = true) {
  return layer("Dense", name, {{"units", units}, {"activation", act}, {"use_bias", bias}});
}
json conv(const std::string& name, int64_t filters, int k, int stride, const std::string& padding, bool bias = true) {
  return layer("Conv2D", name,
               {{"filters", filters}, {"kernel_size", {k, k}}, {"strides", {stride, stride}}, {"padding", padding},
                {"data_format", "channels_last"}, {"dilation_rate", {1, 1}}, {"groups", 1}, {"activation", "relu"},
                {"use_bias", bias}});
}
json pool(const std::string& cls, int size, int stride) {
  return layer(cls, "pool", {{"pool_size", {size, size}}, {"strides", {stride, stride}}, {"padding", "valid"},
                             {"data_format", "channels_last"}});
}
json lstm(const std::string& name, int64_t units, bool sequences) {
  return layer("LSTM", name, {{"units", units}, {"return_sequences", sequences}, {"activation", "tanh"},
                              {"recurrent_activation", "sigmoid"}, {"use_bias", true}, {"go_backwards", false}});
}
json bidirectional(const std::string& name, int64_t units, bool sequences, const json& merge_mode = "concat") {
  return layer("Bidirectional", name, {{"merge_mode", merge_mode}, {"layer", lstm("forward_" + name, units, sequences)}});
}
json flatten() { return layer("Flatten", "flatten", {{"data_format", "channels_last"}}); }
json sequential(const std::vector<json>& layers) {
  return {{"module", "keras"}, {"class_name", "Sequential"}, {"config", {{"name", "sequential"}, {"layers", layers}}}};
}

// Keras's rules.
int64_t keras_size(int64_t in, int k, int stride, const std::string& padding) {
  return padding == "same" ? (in + stride - 1) / stride : (in - k) / stride + 1;
}
int64_t keras_conv2d(int k, int64_t cin, int64_t filters, bool bias) { return int64_t(k) * k * cin * filters + (bias ? filters : 0); }
int64_t keras_dense(int64_t in, int64_t units, bool bias = true) { return in * units + (bias ? units : 0); }
int64_t keras_lstm(int64_t in, int64_t units) { return 4 * (units * (in + units) + units); }
int64_t keras_batch_norm(int64_t channels) { return 4 * channels; }  // gamma, beta, moving mean and variance

void expect_refusal(const json& j, const std::string& part) {
  const std::string e = test::keras_refusal(j);
  EXPECT_NE(e.find(part), std::string::npos) << "want '" << part << "' in: " << (e.empty() ? "(accepted)" : e);
}

struct Ran {
  models::ModelInfo info;
  std::shared_ptr<nn::Module> net;
  Tensor x, y;
};

// `model` read, built, and run for one batch of two random samples of its input's shape (in
// [-1, 1)), forward and backward: it has the parameters it announced and each gets a gradient.
Ran run_batch(const json& model) {
  Ran r{models::keras_model(model.dump(), "crafted.json"), nullptr, Tensor(), Tensor()};
  manual_seed(5);
  r.net = r.info.build();
  r.net->to(kCPU);
  EXPECT_EQ(r.net->num_parameters(), r.info.expected_parameters);
  Shape s{2};
  for (int64_t d : r.info.input_shape) s.push_back(d);
  r.x = test::uniform01(s) * 2.0 + (-1.0);
  r.y = (*r.net)(r.x);
  backward(sum(r.y * r.y + r.y));
  for (const auto& [name, p] : r.net->named_parameters()) {
    const std::vector<float> g = p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>{};
    EXPECT_EQ(int64_t(g.size()), p.numel()) << name;
    EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0; })) << name << " got no gradient";
  }
  return r;
}

// What the layer before a Dense named `fc` gives: fc's weight (square, no bias) set to the identity.
std::vector<float> through_identity(const Ran& r) {
  for (const auto& [name, p] : r.net->named_parameters()) {
    if (name != "fc.weight") continue;
    float* w = p.data<float>();
    const int64_t n = p.size(0);
    for (int64_t i = 0; i < n * n; ++i) w[i] = i % (n + 1) == 0 ? 1.f : 0.f;
  }
  NoGradGuard g;
  return (*r.net)(r.x).to_vector<float>();
}
}  // namespace

// Conv2D's strides, padding and use_bias: the output Keras's rules give (Flatten last shows it
// whole) and the Dense after it built for that size, and Keras's parameter counts.
TEST(KerasOptions, Conv2DStridesPaddingAndBiasAsKeras) {
  struct Case {
    int k, stride;
    std::string padding;
    bool bias;
  };
  for (const Case& c : std::vector<Case>{{3, 2, "valid", true}, {4, 2, "valid", false}, {2, 3, "valid", true},
                                         {1, 2, "valid", false}, {3, 1, "same", true}, {5, 1, "same", false},
                                         {3, 2, "same", true},   {4, 1, "same", true},  {2, 2, "same", false},
                                         {1, 2, "same", true}}) {
    SCOPED_TRACE("kernel " + std::to_string(c.k) + " stride " + std::to_string(c.stride) + " " + c.padding +
                 (c.bias ? "" : " no bias"));
    const int64_t side = keras_size(9, c.k, c.stride, c.padding);
    const Ran whole = run_batch(sequential({input({9, 9, 2}), conv("conv", 4, c.k, c.stride, c.padding, c.bias), flatten()}));
    EXPECT_EQ(whole.y.shape(), (Shape{2, side * side * 4}));
    EXPECT_EQ(whole.info.keras_parameters, keras_conv2d(c.k, 2, 4, c.bias));
    EXPECT_EQ(whole.info.expected_parameters, whole.info.keras_parameters);
    EXPECT_EQ(whole.info.keras_parameters_why, "");
    const Ran head = run_batch(sequential({input({9, 9, 2}), conv("conv", 4, c.k, c.stride, c.padding, c.bias), flatten(),
                                           dense("fc", 3, "softmax", c.bias)}));
    EXPECT_EQ(head.y.shape(), (Shape{2, 3}));
    EXPECT_EQ(head.info.keras_parameters, keras_conv2d(c.k, 2, 4, c.bias) + keras_dense(side * side * 4, 3, c.bias));
  }
}

TEST(KerasOptions, Conv2DOptionsLoupeLacksAreRefused) {
  const json base = sequential({input({9, 9, 2}), conv("conv", 4, 3, 1, "valid"), flatten(), dense("fc", 3, "softmax")});
  auto with = [&](const std::string& key, const json& value) {
    json j = base;
    j["config"]["layers"][1]["config"][key] = value;
    return j;
  };
  expect_refusal(with("padding", "causal"), "layer 'conv' (Conv2D) has padding 'causal'; loupe has valid and same");
  expect_refusal(with("kernel_size", {3, 5}), "has kernel_size [3,5]; loupe's are square");
  expect_refusal(with("strides", {1, 2}), "has strides [1,2]; loupe's are square");
  expect_refusal(with("dilation_rate", {2, 2}), "has dilation_rate [2,2]; loupe's convolutions are not dilated");
  expect_refusal(with("groups", 2), "has groups 2; loupe's convolutions are not grouped");
  expect_refusal(with("data_format", "channels_first"), "has data_format \"channels_first\"; loupe reads Keras's default");
  expect_refusal(with("kernel_initializer", "orthogonal"), "has kernel_initializer 'orthogonal'; loupe has glorot_uniform, "
                 "glorot_normal, he_uniform, he_normal, lecun_uniform, lecun_normal, VarianceScaling, RandomNormal and RandomUniform");
  expect_refusal(with("bias_initializer", "ones"), "has bias_initializer 'ones'; loupe initialises as Keras's default (zeros)");
  expect_refusal(with("filters", 0), "has filters 0; loupe takes a positive whole number up to 16777216");
  expect_refusal(with("kernel_size", {11, 11}), "leaves no pixels of its 9x9 input");
  // Past the input by less than the stride: Keras's floor((9 - 10) / 2) + 1 is 0 (C++'s division
  // toward zero made it 1).
  expect_refusal(sequential({input({9, 9, 2}), conv("conv", 4, 10, 2, "valid"), flatten(), dense("fc", 3, "softmax")}),
                 "leaves no pixels of its 9x9 input");
  expect_refusal(with("trainable", false), "layer 'conv' (Conv2D) is frozen (trainable: false); loupe trains every layer");
  expect_refusal(with("bias_constraint", {{"class_name", "NonNeg"}}), "has a constraint (bias_constraint)");
  expect_refusal(with("dtype", "float16"), "has dtype 'float16'; loupe's layers are float32");
  expect_refusal(sequential({input({9, 2}), conv("conv", 4, 3, 1, "valid"), flatten(), dense("fc", 3, "softmax")}),
                 "(Conv2D) needs an image [height, width, channels] per sample");
}

// A Dense's or a convolution's kernel_initializer as each Keras writes he_normal (a name, Keras
// 2.2's VarianceScaling with distribution "normal", Keras 3's HeNormal) draws Keras's variance,
// truncated at two deviations; he_uniform's bound. The l2 regularizers (Keras 2's L1L2 with l1 0,
// Keras 3's L2) are the model's penalty, l2 * sum(w^2) over the kernel and the bias.
TEST(KerasOptions, InitializersAndL2RegularizersAsKeras) {
  const json forms[] = {"he_normal",
                        {{"class_name", "VarianceScaling"}, {"config", {{"scale", 2.0}, {"mode", "fan_in"}, {"distribution", "normal"}}}},
                        {{"module", "keras.initializers"}, {"class_name", "HeNormal"}, {"config", {{"seed", nullptr}}}}};
  for (const json& init : forms) {
    SCOPED_TRACE(init.dump());
    json fc = dense("fc", 200, "relu");
    fc["config"]["kernel_initializer"] = init;
    const Ran r = run_batch(sequential({input({300}), fc, dense("out", 3, "softmax")}));
    const std::vector<float> w = r.net->named_parameters()[0].second.to_vector<float>();
    double sq = 0, biggest = 0;
    for (float v : w) sq += double(v) * v, biggest = std::max(biggest, double(std::fabs(v)));
    EXPECT_NEAR(sq / double(w.size()), 2.0 / 300, 0.05 * 2.0 / 300);
    EXPECT_LE(biggest, 2 * std::sqrt(2.0 / 300) / 0.87962566103423978 * (1 + 1e-6));
  }
  json c = conv("conv", 4, 3, 1, "valid");
  c["config"]["kernel_initializer"] = "he_uniform";
  c["config"]["kernel_regularizer"] = {{"class_name", "L1L2"}, {"config", {{"l1", 0.0}, {"l2", 1e-3}}}};
  c["config"]["bias_regularizer"] = {{"module", "keras.regularizers"}, {"class_name", "L2"}, {"config", {{"l2", 0.5}}}};
  const Ran r = run_batch(sequential({input({6, 6, 2}), c, flatten(), dense("out", 3, "softmax")}));
  const std::vector<float> w = r.net->named_parameters()[0].second.to_vector<float>();
  fill_(r.net->named_parameters()[1].second, 0.75);  // Keras's zero biases would hide the bias's term
  const std::vector<float> b = r.net->named_parameters()[1].second.to_vector<float>();
  double want = 0;
  for (float v : w) {
    EXPECT_LE(std::fabs(v), std::sqrt(6.0 / (3 * 3 * 2)) * (1 + 1e-6));
    want += 1e-3 * double(v) * v;
  }
  for (float v : b) want += 0.5 * double(v) * v;
  EXPECT_NEAR(r.net->penalty().item(), want, 1e-6 + 1e-5 * want);

  auto with = [](const char* key, const json& value) {
    json d = dense("fc", 4, "relu");
    d["config"][key] = value;
    return sequential({input({5}), d, dense("out", 3, "softmax")});
  };
  expect_refusal(with("kernel_regularizer", {{"class_name", "L1"}, {"config", {{"l1", 0.01}}}}),
                 "layer 'fc' (Dense) has a kernel_regularizer 'l1'; loupe has l2 (L2, or L1L2 with l1 0)");
  expect_refusal(with("kernel_regularizer", {{"class_name", "L1L2"}, {"config", {{"l1", 0.01}, {"l2", 0.01}}}}),
                 "has a kernel_regularizer 'l1l2'; loupe has l2");
  expect_refusal(with("kernel_regularizer", {{"class_name", "L2"}, {"config", {{"l2", -1}}}}), "has l2 -1; loupe takes a number from 0");
  expect_refusal(with("activity_regularizer", "l2"), "has a regularizer (activity_regularizer), which loupe does not apply");
  expect_refusal(with("kernel_initializer", {{"class_name", "VarianceScaling"}, {"config", {{"mode", "fan_sum"}}}}),
                 "has mode 'fan_sum'; Keras's are fan_in, fan_out and fan_avg");
  json l = lstm("lstm", 4, false);
  l["config"]["kernel_regularizer"] = "l2";
  expect_refusal(sequential({input({5, 3}), l, dense("out", 3, "softmax")}), "layer 'lstm' (LSTM) has a regularizer (kernel_regularizer)");
}

// Dense's use_bias, on a vector only; its activations: relu, linear and Keras's others anywhere, softmax or
// sigmoid (one unit) on the last layer only, where the loss applies it. A hidden softmax cannot be
// dropped silently: the model would compute something else than Keras's.
TEST(KerasOptions, DenseBiasAndWhereSoftmaxMayBe) {
  const Ran plain = run_batch(sequential({input({6}), dense("fc1", 16, "relu", false), dense("fc2", 3, "softmax", false)}));
  EXPECT_EQ(plain.y.shape(), (Shape{2, 3}));
  EXPECT_EQ(plain.info.keras_parameters, keras_dense(6, 16, false) + keras_dense(16, 3, false));
  EXPECT_EQ(plain.info.output_activation, "softmax");
  // softmax in an Activation layer of its own after the last Dense (tf.keras 2's cifar10_cnn).
  const Ran act = run_batch(sequential({input({6}), dense("fc1", 16), layer("Activation", "relu", {{"activation", "relu"}}),
                                        dense("fc2", 3), layer("Activation", "softmax", {{"activation", "softmax"}})}));
  EXPECT_EQ(act.info.keras_parameters, keras_dense(6, 16) + keras_dense(16, 3));
  EXPECT_EQ(act.info.output_activation, "softmax");
  EXPECT_EQ(act.info.recipe.loss, train::Loss::CrossEntropy);
  const Ran one = run_batch(sequential({input({6}), dense("fc1", 16, "relu"), dense("fc2", 1, "sigmoid")}));
  EXPECT_EQ(one.y.shape(), (Shape{2, 1}));
  EXPECT_EQ(one.info.recipe.loss, train::Loss::BinaryCrossEntropyWithLogits);

  expect_refusal(sequential({input({6}), dense("hidden", 5, "softmax"), dense("out", 3, "softmax")}),
                 "layer 'hidden' (Dense) has activation 'softmax'; loupe has relu, tanh, sigmoid, elu, selu, gelu, swish (silu), "
                 "hard_sigmoid, softplus, softsign and linear, and softmax on the last layer");
  expect_refusal(sequential({input({6}), dense("hidden", 5, "relu6"), dense("out", 3, "softmax")}),
                 "layer 'hidden' (Dense) has activation 'relu6'");
  expect_refusal(sequential({input({6}), dense("fc1", 5), layer("Activation", "act", {{"activation", "softmax"}}),
                             dense("out", 3, "softmax")}),
                 "layer 'act' (Activation) has activation 'softmax'");
  expect_refusal(sequential({input({6}), dense("fc1", 5, "relu"), dense("out", 3, "softmax"), layer("Dropout", "d", {{"rate", 0.5}})}),
                 "layer 'out' (Dense) has activation 'softmax'");
  expect_refusal(sequential({input({4, 4, 1}), dense("fc", 3, "softmax")}),
                 "layer 'fc' (Dense) takes an input of 3 dimensions per sample; loupe's takes a vector (Flatten before it)");
  json other = sequential({input({6}), dense("fc", 3, "softmax")});
  other["config"]["layers"][1]["config"]["kernel_initializer"] = {{"class_name", "TruncatedNormal"}, {"config", {{"seed", nullptr}}}};
  expect_refusal(other, "has kernel_initializer 'truncatednormal'");
}

// BatchNormalization: Keras counts 4 C (gamma, beta and the moving mean and variance; 2 C
// trained), loupe 2 C and says why; Keras's momentum is the moving statistics' decay and its
// epsilon is inside the root, over the channels of an image or the features of a vector.
TEST(KerasOptions, BatchNormalizationAsKeras) {
  const json bn = layer("BatchNormalization", "bn", {{"axis", -1}, {"momentum", 0.75}, {"epsilon", 0.21}, {"center", true}, {"scale", true}});
  const Ran image = run_batch(sequential({input({2, 2, 3}), bn, flatten()}));
  EXPECT_EQ(image.y.shape(), (Shape{2, 12}));
  EXPECT_EQ(image.info.keras_parameters, keras_batch_norm(3));
  EXPECT_EQ(image.info.expected_parameters, 2 * 3);
  EXPECT_EQ(image.info.keras_parameters_why, "Keras counts BatchNormalization's moving mean and variance");
  const auto buffers = image.net->named_buffers();
  ASSERT_EQ(buffers.size(), 2u);
  // Momentum 0.75 keeps three quarters of the moving mean (0): after the one batch, a quarter of
  // its mean, per channel (x is [2, 2, 2, 3], channels last: 8 values a channel).
  const std::vector<float> x = image.x.to_vector<float>(), mean = buffers[0].second.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    double m = 0;
    for (int i = 0; i < 8; ++i) m += x[size_t(i * 3 + c)];
    EXPECT_NEAR(mean[size_t(c)], 0.25 * m / 8, 1e-6) << "channel " << c;
  }
  // Evaluation: (x - moving mean) / sqrt(moving variance + 0.21), gamma 1 and beta 0; the Flatten
  // after it takes the channels first (docs/keras.md, "Channels").
  image.net->eval();
  const std::vector<float> var = buffers[1].second.to_vector<float>();
  const std::vector<float> y = [&] {
    NoGradGuard g;
    return (*image.net)(image.x).to_vector<float>();
  }();
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 3; ++c)
        EXPECT_NEAR(y[size_t(n * 12 + c * 4 + p)], (x[size_t((n * 4 + p) * 3 + c)] - mean[size_t(c)]) / std::sqrt(var[size_t(c)] + 0.21), 1e-5);
  // Keras 2 writes the axis as a list, and may count it from the batch's: the image's channels.
  json listed = bn;
  listed["config"]["axis"] = {3};
  EXPECT_EQ(run_batch(sequential({input({2, 2, 3}), listed, flatten()})).info.keras_parameters, keras_batch_norm(3));
  // A vector's features, between Dense layers.
  const Ran vec = run_batch(sequential({input({5}), dense("fc1", 6, "relu"), layer("BatchNormalization", "bn"), dense("fc2", 3, "softmax")}));
  EXPECT_EQ(vec.y.shape(), (Shape{2, 3}));
  EXPECT_EQ(vec.info.keras_parameters, keras_dense(5, 6) + keras_batch_norm(6) + keras_dense(6, 3));
  EXPECT_EQ(vec.info.expected_parameters, vec.info.keras_parameters - 2 * 6);

  auto with = [&](const std::string& key, const json& value) {
    json l = bn;
    l["config"][key] = value;
    return sequential({input({2, 2, 3}), l, flatten()});
  };
  expect_refusal(with("axis", 1), "normalises axis 1 of a 3-D sample; loupe's normalises the channels of an image or the features of a vector (axis -1)");
  expect_refusal(with("center", false), "has center false; loupe's has a shift (beta)");
  expect_refusal(with("scale", false), "has scale false; loupe's has a scale (gamma)");
  expect_refusal(with("renorm", true), "has renorm true; loupe's has no batch renormalisation");
  expect_refusal(with("gamma_initializer", "zeros"), "has gamma_initializer 'zeros'; loupe initialises as Keras's default (ones)");
  expect_refusal(sequential({input({4, 3}), layer("BatchNormalization", "bn"), flatten(), dense("fc", 2, "softmax")}),
                 "normalises axis -1 of a 2-D sample");
}

// MaxPooling2D and AveragePooling2D: Keras's windows and strides (the pool size when none is
// given), each output value against the window's maximum or mean.
TEST(KerasOptions, PoolingWindowsAndStridesAsKeras) {
  struct Case {
    std::string cls;
    int64_t side;
    int size, stride;  // stride 0: none given
  };
  for (const Case& c : std::vector<Case>{{"MaxPooling2D", 7, 3, 2}, {"AveragePooling2D", 7, 3, 2}, {"AveragePooling2D", 3, 2, 1},
                                         {"MaxPooling2D", 5, 2, 0}, {"AveragePooling2D", 5, 2, 0}}) {
    SCOPED_TRACE(c.cls + " " + std::to_string(c.size) + " stride " + std::to_string(c.stride) + " on " + std::to_string(c.side));
    json p = pool(c.cls, c.size, c.stride);
    if (c.stride == 0) p["config"].erase("strides");
    const int stride = c.stride ? c.stride : c.size;
    const int64_t out = keras_size(c.side, c.size, stride, "valid");
    const Ran r = run_batch(sequential({input({c.side, c.side, 1}), p, flatten(), dense("fc", out * out, "linear", false)}));
    EXPECT_EQ(r.info.keras_parameters, keras_dense(out * out, out * out, false));
    const std::vector<float> x = r.x.to_vector<float>(), y = through_identity(r);
    ASSERT_EQ(int64_t(y.size()), 2 * out * out);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < out; ++i)
        for (int64_t j = 0; j < out; ++j) {
          double max = -1e30, total = 0;
          for (int64_t a = 0; a < c.size; ++a)
            for (int64_t b = 0; b < c.size; ++b) {
              const float v = x[size_t((n * c.side + i * stride + a) * c.side + j * stride + b)];
              max = std::max(max, double(v));
              total += v;
            }
          const double want = c.cls == "MaxPooling2D" ? max : total / (c.size * c.size);
          EXPECT_NEAR(y[size_t((n * out + i) * out + j)], want, 1e-5) << "sample " << n << " at " << i << "," << j;
        }
  }
  const json pooled = sequential({input({6, 6, 1}), pool("MaxPooling2D", 2, 2), flatten(), dense("fc", 3, "softmax")});
  // 'same' that pads evenly is the pooling's own padding (tests/keras_reference.py's same_padding
  // case checks its values); 2 at stride 2 over 7 pixels pads one after and none before.
  json same = sequential({input({7, 7, 1}), pool("MaxPooling2D", 2, 2), flatten(), dense("fc", 3, "softmax")});
  same["config"]["layers"][1]["config"]["padding"] = "same";
  expect_refusal(same, "layer 'pool' (MaxPooling2D) has padding 'same', which pads its 7x7 input unevenly; loupe's "
                       "pooling pads evenly");
  json oblong = pooled;
  oblong["config"]["layers"][1]["config"]["pool_size"] = {2, 3};
  expect_refusal(oblong, "has pool_size [2,3]; loupe's are square");
  // A window past the input by less than its stride (7 on 6: Keras's size floor(-1 / 7) + 1 = 0).
  expect_refusal(sequential({input({6, 6, 1}), pool("AveragePooling2D", 7, 7), flatten(), dense("fc", 3, "softmax")}),
                 "(AveragePooling2D) leaves no pixels of its 6x6 input");
  expect_refusal(sequential({input({6, 6, 1}), pool("MaxPooling2D", 7, 2), flatten(), dense("fc", 3, "softmax")}),
                 "(MaxPooling2D) leaves no pixels of its 6x6 input");
}

// Conv1D (same, and valid at stride 2) and the 1-D poolings build, run forward and backward with a
// gradient for every parameter, and count as Keras does (k in filters + filters); causal padding
// is refused by name.
TEST(KerasOptions, Conv1DAndTheOneDimensionalPoolingsTrain) {
  auto conv1d = [](const std::string& name, int64_t filters, int stride, const std::string& padding) {
    return layer("Conv1D", name, {{"filters", filters}, {"kernel_size", {3}}, {"strides", {stride}}, {"padding", padding},
                                  {"activation", "relu"}});
  };
  const Ran r = run_batch(sequential({input({12, 4}), conv1d("c1", 5, 1, "same"), layer("MaxPooling1D", "p", {{"pool_size", {2}}}),
                                      conv1d("c2", 3, 2, "valid"), layer("GlobalMaxPooling1D", "g"), dense("fc", 2, "softmax")}));
  EXPECT_EQ(r.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.info.keras_parameters, (3 * 4 * 5 + 5) + (3 * 5 * 3 + 3) + keras_dense(3, 2));
  expect_refusal(sequential({input({12, 4}), conv1d("c", 5, 1, "causal"), layer("GlobalMaxPooling1D", "g"), dense("fc", 2, "softmax")}),
                 "layer 'c' (Conv1D) has padding 'causal'");
  // Keras pads an even kernel's 'same' unevenly, and 'same' at a stride by what the stride leaves
  // over; loupe's Conv1D pads evenly.
  auto same = [](int k, int stride) {
    return layer("Conv1D", "c", {{"filters", 5}, {"kernel_size", {k}}, {"strides", {stride}}, {"padding", "same"}});
  };
  const std::string uneven = "layer 'c' (Conv1D) has padding 'same'; loupe has valid, and same at stride 1 with an odd kernel";
  expect_refusal(sequential({input({12, 4}), same(4, 1), layer("GlobalMaxPooling1D", "g"), dense("fc", 2, "softmax")}), uneven);
  expect_refusal(sequential({input({12, 4}), same(3, 2), layer("GlobalMaxPooling1D", "g"), dense("fc", 2, "softmax")}), uneven);
}

// A batch size fixed in the input's shape ([64, 6]: a stateful model's, or Input(batch_size=64))
// is the recipe's batch, and the header says where it came from; null is Keras's fit's 32.
TEST(KerasOptions, ABatchSizeTheFileFixesIsTheRecipes) {
  json fixed = sequential({input({6}), dense("fc", 3, "softmax")});
  fixed["config"]["layers"][0]["config"]["batch_shape"][0] = 64;
  const models::ModelInfo m = models::keras_model(fixed.dump(), "fixed.json");
  EXPECT_EQ(m.recipe.batch, 64);
  EXPECT_NE(m.recipe_source.find("batch 64 as the file's input fixes it"), std::string::npos) << m.recipe_source;
  EXPECT_EQ(models::keras_model(sequential({input({6}), dense("fc", 3, "softmax")}).dump(), "f.json").recipe.batch, 32);
  fixed["config"]["layers"][0]["config"]["batch_shape"][0] = 0;
  expect_refusal(fixed, "batch_shape's batch size 0 is not null or a positive whole number");
}

// return_sequences: every step's output, both directions' side by side in a Bidirectional, into
// the layer after it (a pooling over time, another LSTM, a Flatten) at its full width; an LSTM
// counts 4 (u (in + u) + u) a direction in both, as Keras's has one bias (cuDNN's second is held
// at zero and not counted; run_batch checks that the built model has that many).
TEST(KerasOptions, ReturnSequencesFeedsTheNextLayerAtItsWidth) {
  const Ran pooled = run_batch(sequential({input({5, 4}), bidirectional("bi", 3, true),
                                           layer("GlobalAveragePooling1D", "mean", {{"data_format", "channels_last"}}),
                                           dense("fc", 2, "softmax")}));
  EXPECT_EQ(pooled.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(pooled.info.keras_parameters, 2 * keras_lstm(4, 3) + keras_dense(6, 2));
  EXPECT_EQ(pooled.info.expected_parameters, pooled.info.keras_parameters);
  EXPECT_EQ(pooled.info.keras_parameters_why, "");
  const Ran stacked = run_batch(sequential({input({5, 4}), lstm("l1", 3, true), lstm("l2", 2, false), dense("fc", 2, "softmax")}));
  EXPECT_EQ(stacked.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(stacked.info.keras_parameters, keras_lstm(4, 3) + keras_lstm(3, 2) + keras_dense(2, 2));
  EXPECT_EQ(stacked.info.expected_parameters, stacked.info.keras_parameters);
  const Ran both = run_batch(sequential({input({5, 4}), bidirectional("b1", 3, true), bidirectional("b2", 2, false),
                                         dense("fc", 2, "softmax")}));
  EXPECT_EQ(both.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(both.info.keras_parameters, 2 * keras_lstm(4, 3) + 2 * keras_lstm(6, 2) + keras_dense(4, 2));
  EXPECT_EQ(both.info.expected_parameters, both.info.keras_parameters);
  const Ran flat = run_batch(sequential({input({5, 4}), bidirectional("bi", 3, true), flatten(), dense("fc", 2, "softmax")}));
  EXPECT_EQ(flat.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(flat.info.keras_parameters, 2 * keras_lstm(4, 3) + keras_dense(5 * 6, 2));
  // Reshape makes a vector a sequence.
  const Ran reshaped = run_batch(sequential({input({12}), layer("Reshape", "r", {{"target_shape", {3, 4}}}), lstm("l", 2, false),
                                             dense("fc", 2, "softmax")}));
  EXPECT_EQ(reshaped.info.keras_parameters, keras_lstm(4, 2) + keras_dense(2, 2));

  expect_refusal(sequential({input({5, 4}), lstm("l", 3, true)}), "the model's output is [5, 3] a sample; a classifier's is a vector");
  expect_refusal(sequential({input({5, 4}), bidirectional("bi", 3, true)}), "the model's output is [5, 6] a sample");
  expect_refusal(sequential({input({5, 4}), lstm("l1", 3, false), lstm("l2", 2, false), dense("fc", 2, "softmax")}),
                 "layer 'l2' (LSTM) takes a sequence [time, features] per sample");
  expect_refusal(sequential({input({5, 4}), lstm("l", 3, true), dense("fc", 2, "softmax")}),
                 "layer 'fc' (Dense) takes an input of 2 dimensions per sample");
  expect_refusal(sequential({input({5, 4}), layer("GlobalAveragePooling1D", "mean"), layer("GlobalAveragePooling1D", "m2"),
                             dense("fc", 2, "softmax")}),
                 "layer 'm2' (GlobalAveragePooling1D) takes a sequence [time, features] per sample");
}

namespace {
// Keras's LSTM over one sample x [T, F], gates i, f, g, o from the flat weights of ops/lstm/lstm.h's
// layout (W [4H, F], R [4H, H], b_W, b_R: b_W + b_R is Keras's bias) at `at`: the state after each
// step, indexed by the step's time; `backwards` reads x from T-1 down to 0 (go_backwards).
std::vector<std::vector<double>> keras_lstm_states(const std::vector<float>& w, size_t at, const float* x, int64_t T,
                                                   int64_t F, int64_t H, bool backwards) {
  const float *W = &w[at], *R = W + 4 * H * F, *bw = R + 4 * H * H, *br = bw + 4 * H;
  auto sigmoid = [](double z) { return 1 / (1 + std::exp(-z)); };
  std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
  std::vector<std::vector<double>> states(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = backwards ? T - 1 - s : s;
    std::vector<double> z(size_t(4 * H));
    for (int64_t r = 0; r < 4 * H; ++r) {
      double v = bw[r] + br[r];
      for (int64_t k = 0; k < F; ++k) v += W[r * F + k] * x[t * F + k];
      for (int64_t k = 0; k < H; ++k) v += R[r * H + k] * h[size_t(k)];
      z[size_t(r)] = v;
    }
    for (int64_t u = 0; u < H; ++u) {
      const size_t i = size_t(u);
      c[i] = sigmoid(z[size_t(H + u)]) * c[i] + sigmoid(z[i]) * std::tanh(z[size_t(2 * H + u)]);
      h[i] = sigmoid(z[size_t(3 * H + u)]) * std::tanh(c[i]);
    }
    states[size_t(t)] = h;
  }
  return states;
}
}  // namespace

// Bidirectional's merge: loupe has Keras's 'concat' (and its default) and refuses 'sum', 'mul',
// 'ave' and None by name. Concat's numbers: [forward's state after x_T-1, backward's after x_0]
// for the last output; with return_sequences, at each time t the forward state after x_t beside
// the backward one after reading x_T-1 down to x_t (Keras reverses the backward sequence back).
// GRU and SimpleRNN: Keras's counts (a GRU's 3 u (in + u) and its bias, two rows of it with
// reset_after: Keras 3's default, Keras 2.2's off), their outputs' shapes, and what they refuse.
TEST(KerasOptions, GruAndSimpleRnnCountAsKeras) {
  auto rnn = [](const std::string& cls, json extra) {
    extra["units"] = 4;
    return layer(cls, "rnn", extra);
  };
  const Ran after = run_batch(sequential({input({6, 3}), rnn("GRU", {{"return_sequences", true}}), flatten(), dense("out", 2, "softmax")}));
  EXPECT_EQ(after.info.keras_parameters, 3 * 4 * (3 + 4) + 2 * 3 * 4 + keras_dense(6 * 4, 2));
  json keras2 = sequential({input({6, 3}), rnn("GRU", json::object()), dense("out", 2, "softmax")});
  keras2.erase("module");
  keras2["keras_version"] = "2.2.4";
  const Ran before = run_batch(keras2);
  EXPECT_EQ(before.info.keras_parameters, 3 * 4 * (3 + 4) + 3 * 4 + keras_dense(4, 2));
  const Ran simple = run_batch(sequential({input({6, 3}), rnn("SimpleRNN", {{"activation", "relu"}, {"use_bias", false}}),
                                           dense("out", 2, "softmax")}));
  EXPECT_EQ(simple.info.keras_parameters, 4 * (3 + 4) + keras_dense(4, 2));
  EXPECT_EQ(simple.y.shape(), (Shape{2, 2}));
  auto refused = [&](const std::string& cls, const json& extra, const std::string& part) {
    expect_refusal(sequential({input({6, 3}), rnn(cls, extra), dense("out", 2, "softmax")}), part);
  };
  refused("GRU", {{"recurrent_dropout", 1.0}}, "layer 'rnn' (GRU) has recurrent_dropout 1.0; loupe takes a number from 0 to below 1");
  refused("GRU", {{"activation", "selu"}}, "has activation 'selu'; loupe's GRU has tanh and relu");
  refused("GRU", {{"recurrent_activation", "relu"}}, "has recurrent_activation 'relu'; loupe's GRU has sigmoid and hard_sigmoid");
  refused("SimpleRNN", {{"return_state", true}}, "returns its states (return_state), several tensors; a Sequential model");
  refused("GRU", {{"recurrent_initializer", "identity"}}, "has recurrent_initializer 'identity'; loupe's is orthogonal, or identity in a SimpleRNN");
  // mnist_irnn's SimpleRNN: kernel RandomNormal(stddev 0.001), recurrent Identity(gain 1), relu.
  json irnn = rnn("SimpleRNN", {{"activation", "relu"}, {"recurrent_initializer", {{"class_name", "Identity"}, {"config", {{"gain", 1.0}}}}},
                                {"kernel_initializer", {{"class_name", "RandomNormal"}, {"config", {{"mean", 0.0}, {"stddev", 0.001}}}}}});
  irnn["config"]["units"] = 100;
  const Ran ir = run_batch(sequential({input({784, 1}), irnn, dense("out", 10, "softmax")}));
  EXPECT_EQ(ir.info.keras_parameters, 100 * (1 + 100) + 100 + keras_dense(100, 10));
  EXPECT_EQ(ir.info.recipe.dataset, "mnist");  // [784, 1]: MNIST's pixels as a sequence
  const std::vector<float> k = ir.net->named_parameters()[0].second.to_vector<float>();
  const std::vector<float> u = ir.net->named_parameters()[1].second.to_vector<float>();
  double sq = 0;
  for (float x : k) sq += double(x) * x;
  EXPECT_NEAR(std::sqrt(sq / double(k.size())), 0.001, 0.0003);
  for (int64_t i = 0; i < 100; ++i)
    for (int64_t j = 0; j < 100; ++j) ASSERT_EQ(u[size_t(i * 100 + j)], i == j ? 1.f : 0.f) << i << "," << j;
}

TEST(KerasOptions, BidirectionalConcatIsTheTwoDirectionsSideBySide) {
  const int64_t T = 3, F = 2, H = 2;
  for (bool sequences : {false, true}) {
    SCOPED_TRACE(sequences ? "return_sequences" : "last output");
    std::vector<json> layers = {input({T, F}), bidirectional("bi", H, sequences)};
    if (sequences) layers.push_back(flatten());
    const Ran r = run_batch(sequential(layers));
    const int64_t width = sequences ? T * 2 * H : 2 * H;
    ASSERT_EQ(r.y.shape(), (Shape{2, width}));
    EXPECT_EQ(r.info.keras_parameters, 2 * keras_lstm(F, H));
    const std::vector<float> w = r.net->named_parameters().at(0).second.to_vector<float>(), x = r.x.to_vector<float>();
    const std::vector<float> y = r.y.to_vector<float>();
    const size_t backward_at = size_t(4 * H * F + 4 * H * H + 8 * H);
    for (int64_t n = 0; n < 2; ++n) {
      const auto fwd = keras_lstm_states(w, 0, &x[size_t(n * T * F)], T, F, H, false);
      const auto bwd = keras_lstm_states(w, backward_at, &x[size_t(n * T * F)], T, F, H, true);
      for (int64_t t = 0; t < (sequences ? T : 1); ++t) {
        const int64_t base = n * width + t * 2 * H;
        const std::vector<double>& f = sequences ? fwd[size_t(t)] : fwd[size_t(T - 1)];
        const std::vector<double>& b = sequences ? bwd[size_t(t)] : bwd[0];
        for (int64_t u = 0; u < H; ++u) {
          EXPECT_NEAR(y[size_t(base + u)], f[size_t(u)], 1e-5) << "sample " << n << " time " << t << " forward " << u;
          EXPECT_NEAR(y[size_t(base + H + u)], b[size_t(u)], 1e-5) << "sample " << n << " time " << t << " backward " << u;
        }
      }
    }
  }
  json unsaid = sequential({input({T, F}), bidirectional("bi", H, false), dense("fc", 2, "softmax")});
  unsaid["config"]["layers"][1]["config"].erase("merge_mode");  // Keras's default: concat
  EXPECT_EQ(run_batch(unsaid).info.keras_parameters, 2 * keras_lstm(F, H) + keras_dense(2 * H, 2));
  for (const json& mode : {json("sum"), json("mul"), json("ave"), json(nullptr)}) {
    expect_refusal(sequential({input({T, F}), bidirectional("bi", H, false, mode), dense("fc", 2, "softmax")}),
                   "layer 'bi' (Bidirectional) has merge_mode " + mode.dump() + "; loupe concatenates the two directions");
  }
  json own = sequential({input({T, F}), bidirectional("bi", H, false), dense("fc", 2, "softmax")});
  own["config"]["layers"][1]["config"]["backward_layer"] = lstm("backward_bi", H, false);
  expect_refusal(own, "has a backward_layer of its own; loupe's runs the forward layer's twin");
}

// GlobalAveragePooling1D is the mean over time, read through an identity Dense.
TEST(KerasOptions, GlobalAveragePooling1DIsTheMeanOverTime) {
  const json mean = layer("GlobalAveragePooling1D", "mean", {{"data_format", "channels_last"}, {"keepdims", false}});
  const Ran r = run_batch(sequential({input({4, 3}), mean, dense("fc", 3, "linear", false)}));
  EXPECT_EQ(r.info.keras_parameters, keras_dense(3, 3, false));
  const std::vector<float> x = r.x.to_vector<float>(), y = through_identity(r);
  ASSERT_EQ(y.size(), 6u);
  for (int n = 0; n < 2; ++n)
    for (int f = 0; f < 3; ++f) {
      double m = 0;
      for (int t = 0; t < 4; ++t) m += x[size_t((n * 4 + t) * 3 + f)];
      EXPECT_NEAR(y[size_t(n * 3 + f)], m / 4, 1e-6) << "sample " << n << " feature " << f;
    }
  json keep = mean;
  keep["config"]["keepdims"] = true;
  expect_refusal(sequential({input({4, 3}), keep, dense("fc", 3, "softmax")}), "has keepdims true; loupe's drops the time axis");
  json first = mean;
  first["config"]["data_format"] = "channels_first";
  expect_refusal(sequential({input({4, 3}), first, dense("fc", 3, "softmax")}), "has data_format \"channels_first\"; loupe averages over time");
}

// An LSTM with Keras's dropout, recurrent_dropout or go_backwards runs step by step (nn::Recurrent,
// Keras's layout: its count is Keras's, no second bias); its masks one per gate where Keras draws
// them so (Keras 2.2's implementation 1, or recurrent dropout), else one.
TEST(KerasOptions, AnLstmWithDropoutRunsStepByStep) {
  auto built = [](const json& file) {
    const Ran r = run_batch(file);
    const auto* s = dynamic_cast<nn::Sequential*>(r.net.get());
    const nn::Recurrent* rec = nullptr;
    for (const auto& [name, m] : s->children())
      if (!rec) rec = dynamic_cast<const nn::Recurrent*>(m.get());
    EXPECT_NE(rec, nullptr);
    EXPECT_EQ(r.info.keras_parameters, keras_lstm(4, 3) + keras_dense(3, 2));
    EXPECT_EQ(r.info.keras_parameters_why, "");
    return rec ? rec->params() : nn::RnnParams{};
  };
  auto with = [](json extra, bool keras2) {
    json l = lstm("l", 3, false);
    for (auto it = extra.begin(); it != extra.end(); ++it) l["config"][it.key()] = it.value();
    json f = sequential({input({5, 4}), l, dense("fc", 2, "softmax")});
    if (keras2) f.erase("module"), f["keras_version"] = "2.2.4";
    return f;
  };
  const nn::RnnParams k3 = built(with({{"dropout", 0.2}}, false));
  EXPECT_EQ(k3.cell, nn::RnnParams::Cell::Lstm);
  EXPECT_DOUBLE_EQ(k3.dropout, 0.2);
  EXPECT_FALSE(k3.mask_per_gate);  // Keras 3's implementation 2: one mask
  EXPECT_TRUE(built(with({{"dropout", 0.2}}, true)).mask_per_gate);  // Keras 2.2's implementation 1
  EXPECT_TRUE(built(with({{"recurrent_dropout", 0.2}}, false)).mask_per_gate);
  EXPECT_TRUE(built(with({{"go_backwards", true}}, false)).go_backwards);
}

// The options of the other layers that loupe cannot honour, each refused by name.
TEST(KerasOptions, OtherLayerOptionsAreRefusedByName) {
  auto lstm_with = [](const std::string& key, const json& value) {
    json l = lstm("l", 3, false);
    l["config"][key] = value;
    return sequential({input({5, 4}), l, dense("fc", 2, "softmax")});
  };
  expect_refusal(lstm_with("stateful", true), "has stateful true; loupe's LSTM has false");
  expect_refusal(lstm_with("return_state", true), "returns its states (return_state), several tensors; a Sequential model");
  expect_refusal(lstm_with("use_bias", false), "has use_bias false; loupe's LSTM has true");
  expect_refusal(lstm_with("unit_forget_bias", false), "has unit_forget_bias false; loupe's LSTM has true");
  expect_refusal(lstm_with("activation", "relu"), "has activation \"relu\"; loupe's LSTM has \"tanh\"");
  json dropped = bidirectional("bi", 3, false);
  dropped["config"]["layer"]["config"]["dropout"] = 0.1;  // runs step by step (BiRecurrent), as Keras's
  const models::ModelInfo bi = models::keras_model(sequential({input({5, 4}), dropped, dense("fc", 2, "softmax")}).dump(), "m.json");
  EXPECT_EQ(bi.keras_parameters, 2 * keras_lstm(4, 3) + keras_dense(6, 2));
  EXPECT_EQ(bi.build()->num_parameters(), bi.expected_parameters);
  expect_refusal(lstm_with("recurrent_initializer", "glorot_uniform"),
                 "has recurrent_initializer 'glorotuniform'; loupe initialises as Keras's default (orthogonal)");
  json inner = bidirectional("bi", 3, false);
  inner["config"]["layer"]["config"]["go_backwards"] = true;
  expect_refusal(sequential({input({5, 4}), inner, dense("fc", 2, "softmax")}),
                 "layer 'bi' (LSTM) reads its sequence backwards inside a Bidirectional");
  json frozen = bidirectional("bi", 3, false);
  frozen["config"]["layer"]["config"]["trainable"] = false;
  expect_refusal(sequential({input({5, 4}), frozen, dense("fc", 2, "softmax")}), "is frozen (trainable: false)");

  expect_refusal(sequential({input({6}), dense("fc1", 5, "relu"), layer("Dropout", "d", {{"rate", 1.0}}), dense("fc2", 3, "softmax")}),
                 "layer 'd' (Dropout) has rate 1.0; loupe takes a number from 0 to below 1");
  expect_refusal(sequential({input({6}), dense("fc1", 5, "relu"), layer("Dropout", "d", {{"rate", 0.5}, {"noise_shape", {nullptr, 1}}}),
                             dense("fc2", 3, "softmax")}),
                 "has noise_shape [null,1]; loupe's dropout draws every value");
  const json emb = layer("Embedding", "e", {{"input_dim", 50}, {"output_dim", 4}});
  expect_refusal(sequential({input({5}), dense("fc1", 5), emb, flatten(), dense("fc2", 2, "softmax")}),
                 "layer 'e' (Embedding) is not the first layer over a sequence of token ids; loupe's Embedding comes first");
  json uniform = emb;
  uniform["config"]["embeddings_initializer"] = "glorot_uniform";
  expect_refusal(sequential({input({5}), uniform, flatten(), dense("fc", 2, "softmax")}),
                 "has embeddings_initializer 'glorotuniform'; loupe initialises as Keras's default (randomuniform)");
  expect_refusal(sequential({input({6, 6, 1}), conv("conv", 2, 3, 1, "valid"), layer("Reshape", "r", {{"target_shape", {8, 4}}}),
                             flatten(), dense("fc", 2, "softmax")}),
                 "layer 'r' (Reshape) reshapes a channels-first image; loupe reshapes vectors and sequences");
  json no_input = sequential({dense("fc1", 5, "relu"), dense("fc2", 3, "softmax")});
  expect_refusal(no_input, "the model's input shape is not in the file");
  no_input["build_config"] = {{"input_shape", {nullptr, 6}}};  // Keras 3 without an InputLayer
  EXPECT_EQ(models::keras_model(no_input.dump(), "m.json").keras_parameters, keras_dense(6, 5) + keras_dense(5, 3));
  no_input.erase("build_config");
  no_input["config"]["build_input_shape"] = {nullptr, 7};  // tf.keras 2
  EXPECT_EQ(models::keras_model(no_input.dump(), "m.json").keras_parameters, keras_dense(7, 5) + keras_dense(5, 3));
}

// compile_config's optimizer: its parameters read, Keras's defaults for the rest, and what loupe's
// optimizers lack refused by name.
TEST(KerasOptions, TheOptimizersOptionsAreReadOrRefused) {
  const json model = sequential({input({6}), dense("fc", 3, "softmax")});
  auto compiled = [&](const std::string& name, const json& config) {
    json j = model;
    j["compile_config"] = {{"optimizer", {{"class_name", name}, {"config", config}}}, {"loss", "categorical_crossentropy"}};
    return j;
  };
  const models::Recipe adam = models::keras_model(compiled("Adam", {{"learning_rate", 0.02}, {"beta_1", 0.8}, {"beta_2", 0.99},
                                                                    {"epsilon", 1e-4}}).dump(), "m.json").recipe;
  EXPECT_EQ(adam.optimizer, "adam");
  EXPECT_DOUBLE_EQ(adam.lr, 0.02);
  EXPECT_DOUBLE_EQ(adam.beta1, 0.8);
  EXPECT_DOUBLE_EQ(adam.beta2, 0.99);
  EXPECT_DOUBLE_EQ(adam.eps, 1e-4);
  const models::Recipe sgd = models::keras_model(compiled("SGD", {{"lr", 0.05}, {"momentum", 0.9}, {"decay", 1e-3}}).dump(), "m.json").recipe;
  EXPECT_EQ(sgd.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(sgd.lr, 0.05);  // Keras 2's name for it
  EXPECT_DOUBLE_EQ(sgd.momentum, 0.9);
  EXPECT_DOUBLE_EQ(sgd.decay, 1e-3);
  const models::Recipe rms = models::keras_model(compiled("RMSprop", {{"rho", 0.8}}).dump(), "m.json").recipe;
  EXPECT_DOUBLE_EQ(rms.rho, 0.8);
  EXPECT_DOUBLE_EQ(rms.lr, 1e-3);
  EXPECT_DOUBLE_EQ(rms.eps, 1e-7);

  // A schedule is read (test_keras_schedules), each of its keys checked.
  const json schedule = {{"class_name", "ExponentialDecay"}, {"config", {{"initial_learning_rate", 0.1}}}};
  expect_refusal(compiled("Adam", {{"learning_rate", schedule}}),
                 "the optimizer (adam)'s learning_rate ExponentialDecay has no decay_steps");
  expect_refusal(compiled("Adam", {{"weight_decay", 0.01}}), "the optimizer (adam) has weight_decay; loupe's optimizers have none");
  expect_refusal(compiled("Adam", {{"amsgrad", true}}), "the optimizer (adam) has amsgrad on; loupe's does not");
  expect_refusal(compiled("SGD", {{"nesterov", true}}), "has nesterov on");
  expect_refusal(compiled("Adam", {{"use_ema", true}}), "has use_ema on");
  expect_refusal(compiled("RMSprop", {{"centered", true}}), "has centered on");
  expect_refusal(compiled("RMSprop", {{"momentum", 0.9}}), "the optimizer (rmsprop) has momentum; loupe's RMSprop has none");
  expect_refusal(compiled("SGD", {{"clipvalue", 0.5}}), "clips gradients (clipvalue)");
}

// ---- hostile files (docs/keras.md, "Hostile files") -------------------------------------------

namespace {
// A small model whose Dense 'fc' has `units` as raw JSON text (any bytes, any depth).
std::string with_units(const std::string& units) {
  return R"({"class_name": "Sequential", "config": {"layers": [)"
         R"({"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 6]}},)"
         R"({"class_name": "Dense", "config": {"name": "fc", "activation": "softmax", "units": )" +
         units + "}}]}}";
}
std::string refusal_of(const std::string& text) {
  try {
    models::keras_model(text, "m.json");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}
// This thread's CPU time reading a file: time the machine gives other processes does not count.
double cpu_seconds_reading(const std::string& text) {
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  try {
    models::keras_model(text, "m.json");
  } catch (const Error&) {
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  return double(t1.tv_sec - t0.tv_sec) + 1e-9 * double(t1.tv_nsec - t0.tv_nsec);
}
json compiled_with(const std::string& optimizer, const json& config) {
  json j = sequential({input({6}), dense("fc", 3, "softmax")});
  j["compile_config"] = {{"optimizer", {{"class_name", optimizer}, {"config", config}}}, {"loss", "categorical_crossentropy"}};
  return j;
}
}  // namespace

// Nesting past the parse-depth limit is refused while parsing: a value 10^5 deep (which once
// overflowed the stack when echoed, or copied in the optimizer's config) and 16 MiB of '['.
TEST(KerasHostile, DeepNestingIsRefusedWhileParsing) {
  const int deep = 100000;
  const std::string e = refusal_of(with_units(std::string(deep, '[') + "1" + std::string(deep, ']')));
  EXPECT_NE(e.find("m.json: nested deeper than 32 levels"), std::string::npos) << e;
  json opt = compiled_with("Adam", {{"learning_rate", 0.01}});
  std::string text = opt.dump();
  const std::string lr = "\"learning_rate\":0.01";
  ASSERT_NE(text.find(lr), std::string::npos);
  text.replace(text.find(lr), lr.size(), "\"x\":" + std::string(deep, '[') + std::string(deep, ']'));
  EXPECT_NE(refusal_of(text).find("nested deeper than 32 levels"), std::string::npos);
  const std::string brackets(16 << 20, '[');
  EXPECT_NE(refusal_of(brackets).find("nested deeper than 32 levels"), std::string::npos);
  EXPECT_LT(cpu_seconds_reading(brackets), 1.0);
  // 32 levels are read: a Keras file nests fewer than 10 (an initializer's config inside a layer).
  const std::string deepest = refusal_of(with_units(std::string(26, '[') + "1" + std::string(26, ']')));
  EXPECT_NE(deepest.find("layer 'fc' (Dense) has units [[[["), std::string::npos) << deepest;
}

// A bad value is echoed as a short prefix, whatever its size.
TEST(KerasHostile, ABadValueIsEchoedAsAShortPrefix) {
  const std::string e = refusal_of(with_units("\"" + std::string(5000, 'x') + "\""));
  EXPECT_NE(e.find("layer 'fc' (Dense) has units \"xxxxxxxx"), std::string::npos) << e;
  EXPECT_NE(e.find("..."), std::string::npos) << e;
  EXPECT_LT(e.size(), 200u) << e;
  const std::string arr = refusal_of(with_units("[" + std::string(2000, '1') + "]"));
  EXPECT_LT(arr.size(), 200u) << arr;
}

// The layer count is capped, and a file at the cap is read in well under a second per thousand
// layers (names compared through a set, the layers parsed once).
TEST(KerasHostile, ManyLayersAreReadQuicklyOrRefused) {
  auto many = [](int n) {
    std::vector<json> layers{input({6}), dense("d", 3, "relu")};
    for (int i = 0; i < n; ++i) layers.push_back(layer("Dropout", "d", {{"rate", 0.1}}));
    layers.push_back(dense("d", 3, "softmax"));  // every layer of one name: each step gets its own
    return sequential(layers);
  };
  EXPECT_NE(test::keras_refusal(many(12000)).find("m.json: 12003 layers; loupe reads at most 10000"), std::string::npos);
  // Reading grows with the layers, not their square (each name was compared with every earlier
  // one: 250,000 layers took 82 s): ten times the layers take well under a hundred times as long.
  // A ratio of this thread's CPU time; the two sizes alternate and each keeps its best of five,
  // so a machine busy for a while slows both. The bound leaves room for the allocator's costs
  // growing with the heap (about 17x here, 35x under ASan).
  const std::string small = many(999).dump(), large = many(9990).dump();
  double best_small = 1e9, best_large = 1e9;
  for (int r = 0; r < 5; ++r) {
    best_small = std::min(best_small, cpu_seconds_reading(small));
    best_large = std::min(best_large, cpu_seconds_reading(large));
  }
  EXPECT_LT(best_large, 60 * best_small);
  const models::ModelInfo m = models::keras_model(large, "m.json");
  EXPECT_EQ(m.expected_parameters, keras_dense(6, 3) + keras_dense(3, 3));
  std::vector<std::string> names;
  for (const auto& [name, p] : m.build()->named_parameters()) names.push_back(name);
  ASSERT_EQ(names.size(), 4u);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "two tensors share a name";
}

// Every number a model file gives is range-checked as the command line's is, and refused with
// the file, the layer or optimizer, the key and the value.
TEST(KerasHostile, EveryNumberIsRangeChecked) {
  expect_refusal(compiled_with("Adam", {{"learning_rate", 0}}), "m.json: the optimizer (adam) has learning_rate 0; loupe takes a number above 0");
  expect_refusal(compiled_with("SGD", {{"lr", -0.1}}), "has lr -0.1; loupe takes a number above 0");
  expect_refusal(compiled_with("Adam", {{"learning_rate", 1e300}}), "has learning_rate 1e+300; loupe takes a number above 0 up to 1000");
  expect_refusal(compiled_with("Adam", {{"beta_1", 1.0}}), "has beta_1 1.0; loupe takes a number from 0 to below 1");
  expect_refusal(compiled_with("Adam", {{"beta_2", -0.5}}), "has beta_2 -0.5");
  expect_refusal(compiled_with("RMSprop", {{"rho", 1.5}}), "has rho 1.5");
  expect_refusal(compiled_with("Adam", {{"epsilon", 0}}), "has epsilon 0; loupe takes a number above 0");
  expect_refusal(compiled_with("SGD", {{"momentum", -1}}), "has momentum -1; loupe takes a number from 0 to below 1");
  expect_refusal(compiled_with("SGD", {{"decay", -1e-3}}), "has decay -0.001; loupe takes a number from 0");
  expect_refusal(compiled_with("Adam", {{"beta_1", "0.9"}}), "has beta_1 \"0.9\"; loupe takes a number");
  auto bn_with = [](const json& config) {
    return sequential({input({2, 2, 3}), layer("BatchNormalization", "bn", config), flatten(), dense("fc", 2, "softmax")});
  };
  expect_refusal(bn_with({{"momentum", 7}}), "m.json: layer 'bn' (BatchNormalization) has momentum 7; loupe takes a number from 0 to below 1");
  expect_refusal(bn_with({{"momentum", 1.0}}), "has momentum 1.0");
  expect_refusal(bn_with({{"epsilon", 0.0}}), "has epsilon 0.0; loupe takes a number above 0");
  expect_refusal(bn_with({{"epsilon", -1}}), "has epsilon -1");
  auto dropout_with = [](const json& rate) {
    return sequential({input({6}), dense("fc1", 5, "relu"), layer("Dropout", "d", {{"rate", rate}}), dense("fc2", 3, "softmax")});
  };
  expect_refusal(dropout_with(-0.1), "layer 'd' (Dropout) has rate -0.1; loupe takes a number from 0 to below 1");
  expect_refusal(dropout_with("half"), "layer 'd' (Dropout) has rate \"half\"");
  EXPECT_EQ(test::keras_refusal(dropout_with(0.5)), "");
  EXPECT_EQ(test::keras_refusal(bn_with({{"momentum", 0.0}, {"epsilon", 1e-5}})), "");
}

// A wrong JSON type or a missing key is named with the file, the layer and the key.
TEST(KerasHostile, AWrongTypeOrMissingKeyNamesTheFileLayerAndKey) {
  json no_units = sequential({input({6}), layer("Dense", "fc", {{"activation", "softmax"}})});
  expect_refusal(no_units, "m.json: layer 'fc' (Dense): key 'units' not found");
  json bias = sequential({input({6}), dense("fc", 3, "softmax")});
  bias["config"]["layers"][1]["config"]["use_bias"] = "yes";
  expect_refusal(bias, "m.json: layer 'fc' (Dense) has use_bias \"yes\"; loupe takes true or false");
  json act = sequential({input({6}), dense("fc", 3, "softmax")});
  act["config"]["layers"][1]["config"]["activation"] = 3;
  expect_refusal(act, "m.json: layer 'fc' (Dense) has activation 3; loupe takes a name");
  json pad = sequential({input({6, 6, 1}), conv("c", 2, 3, 1, "valid"), flatten(), dense("fc", 2, "softmax")});
  pad["config"]["layers"][1]["config"]["padding"] = true;
  expect_refusal(pad, "m.json: layer 'c' (Conv2D) has padding true; loupe takes a name");
  json target = sequential({input({6}), layer("Reshape", "r", {{"target_shape", 6}}), dense("fc", 2, "softmax")});
  expect_refusal(target, "m.json: layer 'r' (Reshape) has target_shape 6; loupe takes a list of dimensions");
  json inner = sequential({input({5, 4}), bidirectional("bi", 3, false), dense("fc", 2, "softmax")});
  inner["config"]["layers"][1]["config"]["layer"]["config"].erase("units");
  expect_refusal(inner, "m.json: layer 'bi' (Bidirectional): key 'units' not found");
  json name = sequential({input({6}), dense("fc", 3, "softmax")});
  name["config"]["layers"][1]["class_name"] = 5;
  expect_refusal(name, "m.json: a layer's class_name is 5");
  expect_refusal(compiled_with("Adam", {{"amsgrad", "yes"}}), "m.json: the optimizer (adam) has amsgrad \"yes\"; loupe takes true or false");
}

// A model file's checkpoint identity is its architecture: the same layers under another path or
// spacing are the same model, other layers another.
TEST(KerasHostile, TheCheckpointIdentityIsTheArchitecture) {
  const json mlp = sequential({input({6}), dense("fc1", 5, "relu"), dense("fc2", 3, "softmax")});
  const models::ModelInfo a = models::keras_model(mlp.dump(), "mlp.json");
  const models::ModelInfo b = models::keras_model(mlp.dump(2), "./runs/copy of mlp.json");
  EXPECT_EQ(a.checkpoint_name(), b.checkpoint_name());
  EXPECT_EQ(a.checkpoint_name().rfind("keras:", 0), 0u) << a.checkpoint_name();
  EXPECT_EQ(a.checkpoint_name().size(), 6u + 16u) << a.checkpoint_name();
  EXPECT_EQ(a.name, "mlp.json");  // what the header and the records show
  const json wider = sequential({input({6}), dense("fc1", 6, "relu"), dense("fc2", 3, "softmax")});
  const json renamed = sequential({input({6}), dense("h", 5, "relu"), dense("fc2", 3, "softmax")});
  const json linear = sequential({input({6}), dense("fc1", 5), dense("fc2", 3, "softmax")});
  for (const json& other : {wider, renamed, linear})
    EXPECT_NE(models::keras_model(other.dump(), "mlp.json").checkpoint_name(), a.checkpoint_name()) << other.dump();

  // Resumed through a Session: the copy's checkpoint loads, another architecture's and one
  // written under the old path name are refused with what to do.
  const std::string dir = ::testing::TempDir();
  const std::string ckpt = dir + "/keras_identity.ckpt", old = dir + "/keras_identity_old.ckpt";
  models::Session(a, {}).save(ckpt, 1);
  models::Session copy(b, {});
  EXPECT_EQ(copy.resume(ckpt).epoch, 1);
  models::ModelInfo w = models::keras_model(wider.dump(), "mlp.json");
  models::Session other(w, {});
  try {
    other.resume(ckpt);
    ADD_FAILURE() << "another architecture's checkpoint was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds model '" + a.checkpoint_name() + "', not '" + w.checkpoint_name()),
              std::string::npos) << e.what();
  }
  models::ModelInfo by_path = a;
  by_path.identity.clear();  // as a model file was named before: by its path
  models::Session(by_path, {}).save(old, 1);
  try {
    models::Session(a, {}).resume(old);
    ADD_FAILURE() << "a checkpoint named by path was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names its model file by path ('mlp.json')"), std::string::npos) << e.what();
  }
}

// Layer by layer costs for the memory estimate: loupe's parameters and the values per sample.
TEST(KerasHostile, EachLayerHasItsCost) {
  const json cnn = sequential({input({6, 6, 1}), conv("c", 4, 3, 1, "valid"), pool("MaxPooling2D", 2, 2), flatten(),
                               layer("BatchNormalization", "bn", {{"axis", -1}}), dense("fc", 3, "softmax")});
  const models::ModelInfo m = models::keras_model(cnn.dump(), "m.json");
  // Every layer, the input and those without parameters: a pooling's or a flatten's output is memory too.
  ASSERT_EQ(m.costs.size(), 6u);
  EXPECT_EQ(m.costs[0].parameters, 0);  // the input layer: the batch itself
  EXPECT_EQ(m.costs[0].activations, 6 * 6 * 1);
  EXPECT_EQ(m.costs[1].layer, "c");
  EXPECT_EQ(m.costs[1].parameters, keras_conv2d(3, 1, 4, true));
  EXPECT_EQ(m.costs[1].activations, 4 * 4 * 4);
  EXPECT_EQ(m.costs[2].parameters, 0);
  EXPECT_EQ(m.costs[2].activations, 2 * 2 * 4);
  EXPECT_EQ(m.costs[3].parameters, 0);
  EXPECT_EQ(m.costs[3].activations, 16);
  EXPECT_EQ(m.costs[4].layer, "bn");
  EXPECT_EQ(m.costs[4].parameters, 2 * 16);  // loupe's: gamma and beta (the moving statistics are buffers)
  EXPECT_EQ(m.costs[4].activations, 16);
  EXPECT_EQ(m.costs[5].layer, "fc");
  EXPECT_EQ(m.costs[5].parameters, keras_dense(16, 3));
  EXPECT_EQ(m.costs[5].activations, 3);
  int64_t total = 0;
  for (const models::LayerCost& c : m.costs) total += c.parameters;
  EXPECT_EQ(total, m.expected_parameters);
}

// Keras's mask_zero (docs/keras.md, "Masking"): the Embedding's mask is a step of its own, which
// the recurrent layers read through a Dropout (an nn::Graph); padding before or after the tokens
// gives one output, and a sample of padding only gives the output of no step read. A layer that
// cannot take the mask is refused by name.
TEST(KerasOptions, MaskZeroReachesTheRecurrentLayers) {
  const json emb = layer("Embedding", "emb", {{"input_dim", 30}, {"output_dim", 8}, {"mask_zero", true}});
  const json m = sequential({input({7}), emb, layer("Dropout", "drop", {{"rate", 0.2}}),
                             layer("GRU", "gru", {{"units", 6}, {"return_sequences", true}}), lstm("lstm", 4, false),
                             dense("out", 1, "sigmoid")});
  const models::ModelInfo info = models::keras_model(m.dump(), "masked.json");
  EXPECT_EQ(info.keras_parameters, 30 * 8 + 3 * 6 * (8 + 6) + 2 * 3 * 6 + keras_lstm(6, 4) + keras_dense(4, 1));
  manual_seed(3);
  auto net = info.build();
  EXPECT_EQ(net->num_parameters(), info.expected_parameters);
  const auto* g = dynamic_cast<const nn::Graph*>(net.get());
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->inputs_of(0), std::vector<int>{nn::Graph::kInput});  // emb_mask, from the ids
  EXPECT_EQ(g->inputs_of(3), (std::vector<int>{2, 0}));            // gru: the dropout's output and the mask
  EXPECT_EQ(g->inputs_of(4), (std::vector<int>{3, 0}));            // lstm
  net->eval();
  const Tensor ids = from_vector(std::vector<float>{0, 0, 0, 3, 5, 1, 2, 3, 5, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, Shape{3, 7});
  const std::vector<float> y = (*net)(ids).to_vector<float>();
  ASSERT_EQ(y.size(), 3u);
  EXPECT_NEAR(y[0], y[1], 1e-6);
  EXPECT_EQ(y[2], 0.f);  // the zero state through the Dense's zero bias
  EXPECT_NE(y[0], 0.f);
  expect_refusal(sequential({input({7}), emb, flatten(), dense("out", 1, "sigmoid")}),
                 "layer 'flatten' (Flatten) receives a sequence's mask (an Embedding's mask_zero or a Masking layer), which "
                 "loupe carries");
  expect_refusal(sequential({input({7}), emb, layer("Conv1D", "conv", {{"filters", 2}, {"kernel_size", 3}}),
                             dense("out", 1, "sigmoid")}),
                 "layer 'conv' (Conv1D) receives a sequence's mask");
}

// A time length of None ([null, null], the Keras example imdb_lstm's Embedding without
// input_length; docs/keras.md, "A time length of None"): the model runs on sequences of any
// length; a layer that needs the length (a Flatten before a Dense) is refused by name.
TEST(KerasOptions, ATimeLengthOfNoneIsTheData) {
  json in = input({7});
  in["config"]["batch_shape"] = {nullptr, nullptr};
  const json emb = layer("Embedding", "emb", {{"input_dim", 30}, {"output_dim", 8}});
  const json gru = layer("GRU", "gru", {{"units", 6}});
  const models::ModelInfo info = models::keras_model(sequential({in, emb, gru, dense("out", 2, "softmax")}).dump(), "free.json");
  EXPECT_EQ(info.input_shape, std::vector<int64_t>{-1});
  EXPECT_NE(info.description.find("input [None]"), std::string::npos) << info.description;
  auto net = info.build();
  for (int64_t t : {3, 11}) {
    const Tensor ids = from_vector(std::vector<float>(size_t(2 * t), 4.f), Shape{2, t});
    EXPECT_EQ((*net)(ids).shape(), (Shape{2, 2})) << t;
  }
  expect_refusal(sequential({in, emb, flatten(), dense("out", 2, "softmax")}),
                 "layer 'flatten' (Flatten) needs the sequence's length, which the file leaves None");
  json features = input({7, 3});
  features["config"]["batch_shape"] = {nullptr, nullptr, 3};
  const models::ModelInfo f = models::keras_model(sequential({features, lstm("lstm", 4, false), dense("out", 2, "softmax")}).dump(),
                                                  "free_features.json");
  EXPECT_EQ(f.input_shape, (std::vector<int64_t>{-1, 3}));
}

// Keras's Masking (docs/keras.md, "Masking"): a step of its own gives the mask, which the recurrent
// layers and GlobalAveragePooling1D read; padding before, after or inside a sequence gives the
// output of its other steps. A layer that cannot take the mask is refused by name, as is a Permute
// of other axes than a sequence's two.
TEST(KerasOptions, MaskingAndTheSequenceLayersAsKeras) {
  const json masking = layer("Masking", "mask", {{"mask_value", -1.0}});
  const json m = sequential({input({5, 2}), masking, layer("GRU", "gru", {{"units", 4}, {"return_sequences", true}}),
                             layer("GlobalAveragePooling1D", "avg"), dense("out", 1, "sigmoid")});
  const models::ModelInfo info = models::keras_model(m.dump(), "masking.json");
  EXPECT_EQ(info.keras_parameters, 3 * 4 * (2 + 4) + 2 * 3 * 4 + keras_dense(4, 1));
  manual_seed(5);
  auto net = info.build();
  const auto* g = dynamic_cast<const nn::Graph*>(net.get());
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->inputs_of(1), (std::vector<int>{nn::Graph::kInput, 0}));  // mask: the input times its mask
  EXPECT_EQ(g->inputs_of(3), (std::vector<int>{2, 0}));                  // avg: the GRU's sequence and the mask
  net->eval();
  const float a = 0.3f, b = -0.7f, c = 1.1f, p = -1.f;
  // Two steps (a, b) and (c, a) with padding after, before, inside; then a step with one padding value.
  const Tensor x = from_vector(std::vector<float>{a, b, c, a, p, p, p, p, p, p, p, p, p, p, p, p, a, b, c, a,
                                                  a, b, p, p, c, a, p, p, p, p, p, b, a, b, c, a, p, p, p, p},
                               Shape{4, 5, 2});
  const std::vector<float> y = (*net)(x).to_vector<float>();
  ASSERT_EQ(y.size(), 4u);
  EXPECT_NEAR(y[1], y[0], 1e-6);
  EXPECT_NEAR(y[2], y[0], 1e-6);
  EXPECT_GT(std::fabs(y[3] - y[0]), 1e-4);  // (p, b) is a step: one feature at mask_value is not padding
  expect_refusal(sequential({input({5, 2}), masking, flatten(), dense("out", 1, "sigmoid")}),
                 "layer 'flatten' (Flatten) receives a sequence's mask");
  expect_refusal(sequential({input({5, 2}), layer("Permute", "perm", {{"dims", {2, 2}}}), flatten(), dense("out", 1)}),
                 "layer 'perm' (Permute) has dims [2,2] over a sample of 2 dimensions; loupe's Permute takes an order");
  expect_refusal(sequential({input({5, 2}), layer("Permute", "perm", {{"dims", {2, 1, 3}}}), flatten(), dense("out", 1)}),
                 "layer 'perm' (Permute) has dims [2,1,3] over a sample of 2 dimensions");
  expect_refusal(sequential({input({5, 2}), layer("RepeatVector", "rep", {{"n", 3}}), flatten(), dense("out", 1)}),
                 "layer 'rep' (RepeatVector) takes a vector per sample");
  expect_refusal(sequential({input({4}), layer("ReLU", "relu", {{"max_value", 6.0}}), dense("out", 1)}),
                 "layer 'relu' (ReLU) has max_value 6.0; loupe's relu is not capped");
}

// SpatialDropout1D and 2D drop whole feature maps in training: one draw per sample and channel,
// the same at every step or pixel, the kept ones scaled by 1 / (1 - rate); in evaluation nothing.
TEST(KerasOptions, SpatialDropoutDropsWholeChannels) {
  for (const bool image : {false, true}) {
    const json drop = layer(image ? "SpatialDropout2D" : "SpatialDropout1D", "drop", {{"rate", 0.5}});
    const json m = sequential({input(image ? std::vector<int64_t>{3, 4, 16} : std::vector<int64_t>{6, 16}), drop, flatten(),
                               dense("out", 2, "softmax")});
    const models::ModelInfo info = models::keras_model(m.dump(), "spatial.json");
    manual_seed(7);
    auto net = info.build();
    std::shared_ptr<nn::Module> d;
    for (const auto& [name, mod] : net->children())
      if (name == "drop") d = mod;
    ASSERT_NE(d, nullptr);
    const int64_t n = 8, channels = 16, at = image ? 12 : 6;  // pixels or steps per channel
    const Tensor x = image ? ones(Shape{n, channels, 3, 4}) : ones(Shape{n, at, channels});
    d->train();
    const std::vector<float> y = (*d)(x).to_vector<float>();
    int dropped = 0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t ch = 0; ch < channels; ++ch) {
        auto value = [&](int64_t k) { return image ? y[size_t((s * channels + ch) * at + k)] : y[size_t((s * at + k) * channels + ch)]; };
        for (int64_t k = 0; k < at; ++k) ASSERT_EQ(value(k), value(0)) << image << " sample " << s << " channel " << ch;
        ASSERT_TRUE(value(0) == 0.f || value(0) == 2.f) << value(0);
        dropped += value(0) == 0.f;
      }
    EXPECT_GT(dropped, n * channels / 4);
    EXPECT_LT(dropped, n * channels * 3 / 4);
    d->eval();
    EXPECT_EQ((*d)(x).to_vector<float>(), x.to_vector<float>());
  }
}
