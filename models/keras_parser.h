// The Keras model-file reader's parser of layers (models/keras_layers.h): the state a file's
// layers are read with, one layer after another, into the steps of a loupe model. Its layers are
// read in models/keras_layers.cpp (vectors, images, merges) and models/keras_sequence_layers.cpp
// (sequences and recurrent layers). Internal to models/.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/file_check.h"
#include "models/keras_layers.h"
#include "nn/graph.h"
#include "nn/recurrent.h"

namespace loupe::models::keras {

class Parser : public Parsed {
 public:
  Parser(std::string file, std::vector<int64_t> input, Dialect d) : file_(std::move(file)), dialect_(std::move(d)) {
    shape_ = std::move(input);
  }

  void layer(const Layer& l, bool last);

  // A step of the data set's adaptation (adapt_input), before any layer's.
  void push(const std::string& name, std::function<std::shared_ptr<nn::Module>()> make);

  // The tensor a layer's output is, as the layers after it read it: its Keras shape, its layout,
  // and the step that gives it (-1: the model's input) and which of that step's outputs it is.
  // `mask`: the step that gives its mask (Keras's: an Embedding's mask_zero), or kNoMask.
  static constexpr int kNoMask = -2;
  struct Value {
    std::vector<int64_t> shape;
    bool chw;
    std::vector<int64_t> flat_chw;
    int step;
    int mask;
    bool timed;
    int output = 0;
  };
  Value value() const { return {shape_, chw_, flat_chw_, current_, mask_, timed_, current_output_}; }
  void set(const Value& v);
  // A merge layer's inputs, set before its layer() (a functional model's).
  std::vector<Value> merging;
  // A recurrent layer's initial states (Keras's initial_state: its call's tensors after the
  // sequence), set before its layer(); and, after it, the states it returns (return_state), which
  // follow its output.
  std::vector<Value> initial_states, returned_states;
  bool functional = false;

  void dispatch(const Layer& l);


 private:
  static const json& cfg(const Layer& l) { return *l.cfg; }
  Config conf(const Layer& l) const { return {cfg(l), file_ + ": " + layer_label(l)}; }

  // A positive whole number under `key` (units, filters, a vocabulary), at most `max`.
  int64_t count(const Layer& l, const json& c, const char* key, int64_t max = kMaxDim);
  // Parameters as Keras counts them, and loupe's (`extra` more: cuDNN's second LSTM bias, or fewer).
  void parameters(const Layer& l, __int128 keras, __int128 extra);
  void note(const std::string& why);
  [[noreturn]] void fail(const Layer& l, const std::string& why) const { refuse_file(file_, layer_label(l) + " " + why); }

  // A module named after its Keras layer (the profile and the trace show these names), `suffix`
  // for the parts a layer brings ("conv2d_relu"); a name taken already gets its position (looked
  // up in a set: a file of thousands of layers of one name is read in linear time).
  void add(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make, const std::string& suffix = "");
  // The Keras variables the step just added holds.
  void own(KerasWeights w) { steps.back().weights = std::make_shared<const KerasWeights>(std::move(w)); }

  // Options no layer of loupe's honours: refused wherever they are set.
  void common(const Layer& l);

  // The initializer under `key` must be Keras's default for it (loupe initialises as Keras's defaults).
  void init(const Layer& l, const char* key, const std::string& want);

  // The layer's Keras options for its weights (keras_initializer, keras_l2 in keras_config.cpp).
  nn::VarianceScaling kernel_init(const Layer& l, int64_t fan_in);
  double l2_of(const Layer& l, const char* key);
  // The maker of a Dense or a convolution with Keras's options for its weights: the kernel's
  // initializer (drawn here unless it is the modules' own glorot_uniform), zero biases, and the
  // kernel's and bias's l2 regularizers (nn::Module::regularize).
  std::function<std::shared_ptr<nn::Module>()> weighted(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make,
                                                        int64_t fan_in, int64_t fan_out);

  void need_value(const Layer& l, const char* key, const json& want, const std::string& why);
  // Each key of `want` in `c` (a recurrent layer's config) at its value, or unset.
  void need_values(const Layer& l, const json& c, const json& want);

  // An activation inside or after a layer: relu, tanh, sigmoid, linear, Keras's others (elu, selu,
  // gelu, swish, hard_sigmoid, softplus, softsign), or on the model's last layer softmax
  // (cross-entropy) or sigmoid on one unit (binary cross-entropy): the loss applies those.
  void activation(const Layer& l, const std::string& a, const int64_t* units);

  int64_t features(const Layer& l);

  void dense(const Layer& l);
  // Keras's ReLU and ELU layers at their defaults: the activations.
  void activation_layer(const Layer& l);

  // An image layer: the shape must be [H, W, C], and the tensor channels-first from here on.
  void image(const Layer& l);

  // A square pair ([3, 3] or 3) from the config: kernel_size, strides, pool_size.
  int square(const Layer& l, const char* key, int fallback);

  // A Conv1D's padding on each side (valid, or same at stride 1 with an odd kernel) and groups.
  int conv_padding(const Layer& l, int k, int stride);
  // Keras's 2-D padding (TensorFlow's): valid, none; same, an output of ceil(size / stride) pixels
  // with the padding's odd pixel after. Returns the pixels on each side of an even padding (the
  // layer's own) and sets `uneven` to each side's (top, bottom, left, right) where they differ.
  int padding_2d(const Layer& l, int k, int stride, const std::string& what, std::vector<int64_t>* uneven);
  // A Conv2D's padding: an uneven one as a ZeroPadding2D step before the convolution.
  int conv2d_padding(const Layer& l, int k, int stride);
  void zero_pad(const Layer& l, const std::vector<int64_t>& sides, const std::string& suffix);
  // ZeroPadding2D's padding: 1 (every side), [rows, columns], or [[top, bottom], [left, right]].
  void zero_padding(const Layer& l);
  // The output's rows and columns of a window of k pixels at `stride` over the image padded by p
  // on each side (a convolution's or a pooling's), refused where it leaves none.
  std::pair<int64_t, int64_t> window_out(const Layer& l, int k, int stride, int p);
  void valid_pooling(const Layer& l) { need_value(l, "padding", "valid", "loupe's pooling has valid padding"); }

  void conv(const Layer& l);

  void pool(const Layer& l);

  void batch_norm(const Layer& l);

  void dropout(const Layer& l);
  // SpatialDropout1D over a sequence's features, SpatialDropout2D over an image's channels.
  void spatial_dropout(const Layer& l);

  void flatten(const Layer& l);

  // A window's size from the config: 3 or [3] (kernel_size, strides, pool_size of a 1-D layer).
  int single(const Layer& l, const char* key, int fallback);

  void sequence(const Layer& l);

  void conv1d(const Layer& l);

  void pool1d(const Layer& l);

  void global_pool2d(const Layer& l);

  void reshape_layer(const Layer& l);

  void embedding(const Layer& l);

  // LSTM(units) as Keras's defaults have it (the ones loupe's kernels compute), alone or inside
  // Bidirectional; the others are refused by name.
  // `inner_name`: a Bidirectional's LSTM's own name (its variables' prefix).
  void lstm(const Layer& l, const json& c, bool bidirectional, const std::string& inner_name = "");

  // The slope of the gates' hard_sigmoid (LstmParams::hard_slope), or 0 for the sigmoid.
  float recurrent_slope(const Layer& l, const json& c) const;

  // Keras's GRU, SimpleRNN, and an LSTM with what nn::LSTM's kernels lack (nn::Recurrent, Keras's
  // layouts): the options it computes, the others refused by name.
  // `inner_name`: a Bidirectional's wrapped layer's own name (its variables' prefix), which makes
  // the step a BiRecurrent of the layer and its backward twin.
  void recurrent(const Layer& l, const std::string& inner_name = "");

  // Keras's return_state and initial_state (a functional model's): the states the step returns
  // (returned_states) and the ones it starts from (initial_states, read as its inputs after x).
  void states(const Layer& l, nn::RnnParams& p, bool bidirectional);
  void read_states(const nn::RnnParams& p);

  // Keras's dropout and recurrent_dropout, and how many masks it draws: one per gate in its
  // implementation 1 (Keras 2's default; every Keras's with recurrent dropout), else one.
  void dropouts(const Layer& l, nn::RnnParams& p);

  // A GRU's or SimpleRNN's maker with its kernel_initializer (as a Dense's) and its
  // recurrent_initializer: Keras's default orthogonal or, for a SimpleRNN (mnist_irnn's), Identity.
  std::function<std::shared_ptr<nn::Module>()> recurrent_init(const Layer& l, const nn::RnnParams& p);

  void bidirectional(const Layer& l);

  // TimeDistributed(layer): the wrapped layer over each step of [time, ...] as over N T samples
  // (batch and time folded into one before it, unfolded after; an image layer's output made
  // channels-last again). Its weights are the wrapper's, as Keras names them (Keras 3 keeps them in
  // the wrapper's "layer").
  void time_distributed(const Layer& l);

  // Keras's merge layers over `merging` (a functional model's): one shape, or Concatenate's shapes
  // equal but along its axis. An image that is channels-first in one input is made so in all.
  void merge(const Layer& l, nn::MergeOp op);

  void global_average(const Layer& l);
  // Keras's Masking: the mask of the steps with a feature other than mask_value, and the sequence
  // times it (the steps it masks are zeros).
  void masking(const Layer& l);
  // RepeatVector(n): a vector as n steps.
  void repeat_vector(const Layer& l);
  // Permute(dims) of a sequence's or an image's axes (an image channels-last first).
  void permute(const Layer& l);

  std::string file_;
  Dialect dialect_;
  int current_ = -1;  // the step whose output the next layer reads (-1: the model's input)
  int current_output_ = 0;  // which of that step's outputs
  int mask_ = kNoMask;  // the step giving that output's mask
  bool timed_ = true;   // that output still has the input's time axis
  bool last_ = false;
  std::vector<int64_t> flat_chw_;  // the [C, H, W] image a Flatten made the vector of, until a Dense
  std::unordered_set<std::string> names_;  // the steps' names
};

}  // namespace loupe::models::keras
