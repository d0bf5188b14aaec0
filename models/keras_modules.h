// The modules a Keras layer needs that loupe's layer set does not have as such (models/
// keras_layers.cpp builds them). Internal to models/.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/text.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "ops/activation.h"
#include "ops/bias_act.h"
#include "ops/cat.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/mask.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe::models::keras {

// [N, H, W, C] -> [N, C, H, W]: Keras's channels-last image for loupe's convolutions, in NCHW's
// own format. With one channel the permuted tensor is already dense with channels-last's exact
// strides, which plain contiguous() kept: the convolutions then ran channels-last and the dropout
// after them drew its mask in that order (mnist_cnn from its file trained to other weights than
// the reference model; KerasJson.TheReferenceModelsTrainFromTheirFilesToTheSameWeights).
class ChannelsFirst : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override {
    return contiguous(transpose(transpose(x, 1, 3), 2, 3), MemoryFormat::Contiguous);
  }
  std::string type_name() const override { return "ChannelsFirst"; }
};

// [N, C, H, W] -> [N, H, W, C]: an image layer's output back in Keras's layout where the layers
// after it read channels-last (a TimeDistributed's wrapped image layer, for the steps after it).
class ChannelsLast : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override {
    return contiguous(transpose(transpose(x, 1, 3), 1, 2), MemoryFormat::Contiguous);
  }
  std::string type_name() const override { return "ChannelsLast"; }
};

// GlobalAveragePooling2D and GlobalMaxPooling2D: [N, C, H, W] -> [N, C] (the mean, or one max
// pooling window over the whole image).
class GlobalPool2D : public nn::Module {
 public:
  GlobalPool2D(bool max, int h, int w) : max_(max), h_(h), w_(w) {}
  Tensor forward(const Tensor& x) override {
    if (!max_) return global_avg_pool(x);
    return reshape(max_pool2d(x, Pool2dParams{h_, w_, h_, w_}), Shape{x.size(0), x.size(1)});
  }
  std::string type_name() const override { return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D"; }

 private:
  bool max_;
  int h_, w_;
};

// ZeroPadding2D, and the uneven padding of Keras's 'same' before a convolution: zero rows above and
// below [N, C, H, W], zero columns left and right (sides: top, bottom, left, right).
class ZeroPad2D : public nn::Module {
 public:
  explicit ZeroPad2D(std::vector<int64_t> sides) : sides_(std::move(sides)) {}
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (int dim : {2, 3}) {
      const int64_t before = sides_[size_t(2 * (dim - 2))], after = sides_[size_t(2 * (dim - 2) + 1)];
      auto zero = [&](int64_t n) {
        Shape s = h.shape();
        s[dim] = n;
        return zeros(s, h.dtype(), h.device());
      };
      std::vector<Tensor> parts;
      if (before) parts.push_back(zero(before));
      parts.push_back(h);
      if (after) parts.push_back(zero(after));
      if (parts.size() > 1) h = cat(parts, dim);
    }
    return h;
  }
  std::string type_name() const override {
    return "ZeroPad2D(" + std::to_string(sides_[0]) + ", " + std::to_string(sides_[1]) + ", " + std::to_string(sides_[2]) +
           ", " + std::to_string(sides_[3]) + ")";
  }

 private:
  std::vector<int64_t> sides_;
};

// A sequence [N, T, F] (Keras's channels last) as the image [N, F, 1, T] that loupe's 2-D
// convolutions and poolings take, and back.
inline Tensor sequence_image(const Tensor& x) {
  return reshape(contiguous(transpose(x, 1, 2)), Shape{x.size(0), x.size(2), 1, x.size(1)});
}
inline Tensor image_sequence(const Tensor& y) {
  return contiguous(transpose(reshape(y, Shape{y.size(0), y.size(1), y.size(3)}), 1, 2));
}

// Keras's Conv1D over [N, T, F]: a 2-D convolution of sequence_image's [N, F, 1, T] with a [1, k]
// kernel, so the parameter "weight" is [filters, F, 1, k]; an activation after it joins the
// convolution's epilogue as nn::Conv2d's does.
class Conv1D : public nn::Module {
 public:
  Conv1D(int64_t in, int64_t filters, int k, int stride, int pad, bool with_bias) : stride_(stride), pad_(pad) {
    Tensor w = empty(Shape{filters, in, 1, k}, DType::f32, kCPU);
    nn::glorot_uniform_(w, in * k, filters * k);  // Keras's fans for a [k, in, filters] kernel
    weight = register_parameter("weight", w);
    if (with_bias) bias = register_parameter("bias", zeros(Shape{filters}, DType::f32, kCPU));
  }
  Tensor forward(const Tensor& x) override { return forward_fused(x, nn::Epilogue{}); }
  bool accepts(const nn::Epilogue&) const override { return true; }
  Tensor forward_fused(const Tensor& x, const nn::Epilogue& e) override {
    Conv2dParams p;
    p.stride_w = stride_;
    p.pad_w = pad_;
    Tensor y = conv2d(sequence_image(nn::autocast(x)), nn::autocast(weight), p);
    if (bias.defined() || e.act || e.dropout > 0) y = bias_act(y, nn::autocast(bias), e.act, e.dropout, true);
    return image_sequence(y);
  }
  std::string type_name() const override {
    return "Conv1D(" + std::to_string(weight.size(1)) + " -> " + std::to_string(weight.size(0)) + ", " +
           std::to_string(weight.size(3)) + ", stride " + std::to_string(stride_) + ", pad " + std::to_string(pad_) + ")";
  }
  Tensor weight, bias;

 private:
  int stride_, pad_;
};

// MaxPooling1D, AveragePooling1D and GlobalMaxPooling1D over [N, T, F]: a [1, k] window of
// sequence_image's image; the global one a window of the whole sequence, giving [N, F].
class Pool1D : public nn::Module {
 public:
  Pool1D(bool max, int k, int stride, bool global) : max_(max), k_(k), stride_(stride), global_(global) {}
  Tensor forward(const Tensor& x) override {
    const Pool2dParams p{1, k_, 1, stride_};
    const Tensor img = sequence_image(x), y = max_ ? max_pool2d(img, p) : avg_pool2d(img, p);
    return global_ ? reshape(y, Shape{x.size(0), x.size(2)}) : image_sequence(y);
  }
  std::string type_name() const override {
    return std::string(global_ ? "GlobalMaxPooling1D" : max_ ? "MaxPooling1D" : "AveragePooling1D") + "(" +
           std::to_string(k_) + ", stride " + std::to_string(stride_) + ")";
  }

 private:
  bool max_;
  int k_, stride_;
  bool global_;
};

// Keras's mask of an Embedding with mask_zero: [N, T] token ids -> 1 where the id is not 0 (the
// padding), else 0, as float32 (min(id, 1): ids are whole numbers from 0); nn::Recurrent reads it.
class TokenMask : public nn::Module {
 public:
  Tensor forward(const Tensor& ids) override {
    const Tensor x = loupe::to(ids, DType::f32);
    return x - relu(x + -1.0);
  }
  std::string type_name() const override { return "Mask(mask_zero)"; }
};

// A GRU, SimpleRNN or LSTM of Keras's (nn::Recurrent) with Keras's initializers where they are not
// its defaults: `kernel` (null: glorot_uniform), and the identity times `identity_gain` as the
// recurrent kernel (0: orthogonal).
inline std::shared_ptr<nn::Module> keras_recurrent(const nn::RnnParams& p, const nn::VarianceScaling* kernel,
                                                   double identity_gain) {
  auto m = std::make_shared<nn::Recurrent>(p);
  if (kernel) nn::variance_scaling_(m->kernel, p.input_size, p.gates() * p.units, *kernel);
  if (identity_gain > 0) {
    fill_(m->recurrent_kernel, 0.0);
    for (int64_t i = 0; i < p.units; ++i) m->recurrent_kernel.data<float>()[i * p.units + i] = float(identity_gain);
  }
  return m;
}

// Keras's Bidirectional over a GRU, SimpleRNN or step-by-step LSTM: the layer and its twin reading
// the sequence backwards (and its mask, if any), their outputs side by side; a returned sequence's
// backward half in the input's order (RnnParams::time_order), as Keras's.
class BiRecurrent : public nn::Module {
 public:
  BiRecurrent(std::shared_ptr<nn::Module> forward, std::shared_ptr<nn::Module> backward)
      : forward_(register_module("forward", std::move(forward))), backward_(register_module("backward", std::move(backward))) {}
  Tensor forward(const Tensor& x) override { return forward_many({x}); }
  bool takes(size_t n) const override { return n == 1 || n == 2; }
  Tensor forward_many(const std::vector<Tensor>& xs) override {
    const Tensor f = forward_->call_many(xs), b = backward_->call_many(xs);
    return cat({f, b}, f.dim() - 1);
  }
  std::string type_name() const override { return "Bidirectional(" + forward_->type_name() + ")"; }

 private:
  std::shared_ptr<nn::Module> forward_, backward_;
};

// GlobalAveragePooling1D: [N, T, F] -> [N, F]; given a mask [N, T] as well, the mean over the
// steps it keeps, as Keras's, but zeros for a sequence of padding only (Keras's 0 / 0, NaN).
class MeanOverTime : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return mean(x, 1); }
  bool takes(size_t n) const override { return n == 1 || n == 2; }
  Tensor forward_many(const std::vector<Tensor>& xs) override {
    if (xs.size() == 1) return forward(xs[0]);
    const Tensor m = loupe::to(xs[1], xs[0].dtype());
    const Tensor kept = sum(m, 1, true);  // [N, 1]
    return sum(xs[0] * reshape(m, Shape{m.size(0), m.size(1), 1}), 1) / (kept + relu(kept * -1.0 + 1.0));  // 0 / 1 where none
  }
  std::string type_name() const override { return "GlobalAveragePooling1D"; }
};

// Keras's Masking: the mask of a sequence [N, T, F], 1 at each step with a feature other than
// `value` (a step of its own that the recurrent layers read), and the sequence times it.
class MaskOfValues : public nn::Module {
 public:
  explicit MaskOfValues(double value) : value_(value) {}
  Tensor forward(const Tensor& x) override { return any_not_equal(x, value_); }
  std::string type_name() const override { return "Mask(mask_value " + fmt("%g", value_) + ")"; }

 private:
  double value_;
};
class ApplyMask : public nn::Module {
 public:
  bool takes(size_t n) const override { return n == 2; }
  Tensor forward(const Tensor& x) override { return x; }
  Tensor forward_many(const std::vector<Tensor>& xs) override {
    const Tensor& m = xs[1];
    return xs[0] * reshape(m, Shape{m.size(0), m.size(1), 1});
  }
  std::string type_name() const override { return "Masking"; }
};

// RepeatVector(n): [N, F] -> [N, n, F].
class RepeatSteps : public nn::Module {
 public:
  explicit RepeatSteps(int64_t n) : n_(n) {}
  Tensor forward(const Tensor& x) override {
    return reshape(x, Shape{x.size(0), 1, x.size(1)}) * ones(Shape{1, n_, 1}, x.dtype(), x.device());
  }
  std::string type_name() const override { return "RepeatVector(" + std::to_string(n_) + ")"; }

 private:
  int64_t n_;
};

// Keras's Permute over a sample's axes in Keras's (channels-last) layout: the output's axis i is
// the input's axis dims[i], counted from 1 as Keras's `dims` ([2, 1] swaps a sequence's steps and
// features; [3, 1, 2] puts an image's channels first).
class PermuteAxes : public nn::Module {
 public:
  explicit PermuteAxes(std::vector<int> dims) : dims_(std::move(dims)) {}
  Tensor forward(const Tensor& x) override {
    std::vector<int> at(dims_.size());  // which input axis each position holds
    for (size_t i = 0; i < at.size(); ++i) at[i] = int(i) + 1;
    Tensor y = x;
    for (size_t i = 0; i < dims_.size(); ++i) {
      size_t j = i;
      while (at[j] != dims_[i]) ++j;
      if (j == i) continue;
      y = transpose(y, int(i) + 1, int(j) + 1);
      std::swap(at[i], at[j]);
    }
    return contiguous(y, MemoryFormat::Contiguous);
  }
  std::string type_name() const override {
    std::string s = "Permute(";
    for (size_t i = 0; i < dims_.size(); ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + ")";
  }

 private:
  std::vector<int> dims_;
};

// SpatialDropout1D/2D: dropout of whole feature maps, one draw per sample and channel, the same at
// every step or pixel. `channel_dim` 2 for a sequence [N, T, F], 1 for an image [N, C, H, W].
class SpatialDropout : public nn::Module {
 public:
  SpatialDropout(double rate, int channel_dim) : rate_(rate), channel_dim_(channel_dim) {}
  Tensor forward(const Tensor& x) override {
    if (!is_training() || rate_ == 0) return x;
    Shape s(std::vector<int64_t>(size_t(x.dim()), 1));
    s[0] = x.size(0);
    s[channel_dim_] = x.size(channel_dim_);
    return x * dropout(ones(s, x.dtype(), x.device()), rate_, true);
  }
  std::string type_name() const override { return "SpatialDropout(" + fmt("%g", rate_) + ")"; }

 private:
  double rate_;
  int channel_dim_;
};

// TimeDistributed's folding: [N, T, ...] as N T samples for the wrapped layer, and its output back
// as [N, T, ...] (T the steps).
class FoldTime : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override {
    Shape s{x.size(0) * x.size(1)};
    for (int d = 2; d < x.dim(); ++d) s.push_back(x.size(d));
    return reshape(contiguous(x), s);
  }
  std::string type_name() const override { return "FoldTime"; }
};
class UnfoldTime : public nn::Module {
 public:
  explicit UnfoldTime(int64_t steps) : steps_(steps) {}
  Tensor forward(const Tensor& y) override {
    Shape s{y.size(0) / steps_, steps_};
    for (int d = 1; d < y.dim(); ++d) s.push_back(y.size(d));
    return reshape(contiguous(y), s);
  }
  std::string type_name() const override { return "UnfoldTime(" + std::to_string(steps_) + ")"; }

 private:
  int64_t steps_;
};

// char_lstm's characters arrive as ids [N, T]; Keras's model takes them one-hot [N, T, C].
class OneHot : public nn::Module {
 public:
  explicit OneHot(int64_t classes) : classes_(classes) {}
  Tensor forward(const Tensor& ids) override { return one_hot(ids, classes_); }
  std::string type_name() const override { return "OneHot(" + std::to_string(classes_) + ")"; }

 private:
  int64_t classes_;
};

// Keras's LSTM (or Bidirectional(LSTM), merge_mode concat): the sequence [N, T, D*H] with
// return_sequences, else the last state of each direction side by side [N, D*H].
// An nn::LSTM itself (its weight is the layer's own, "lstm.weight" under a layer named "lstm", as
// checkpoints name the reference models' tensors) that gives what Keras's LSTM gives: the last
// step's state (both directions' side by side, as Bidirectional(merge_mode='concat')), or every
// step's output with return_sequences.
class KerasLstm : public nn::LSTM {
 public:
  KerasLstm(const LstmParams& p, bool sequences)
      : nn::LSTM(p), units_(p.hidden_size), dirs_(p.directions()), sequences_(sequences) {}
  Tensor forward(const Tensor& x) override {  // inside the layer's range (Module::operator())
    const LstmResult r = run(x);
    if (sequences_) return r.y;
    return reshape(transpose(r.h, 0, 1), Shape{x.size(0), dirs_ * units_});
  }

 private:
  int64_t units_, dirs_;
  bool sequences_;
};

}  // namespace loupe::models::keras
