// The reference models as they were written in C++ before their Keras files became their one
// definition (models/reference_models.cpp): kept here, in the tests only, as the witness the files
// are checked against (test_keras_json), so that a change to the files or to the Keras reader that
// alters a model fails a test instead of passing unseen.
#include "reference_definitions.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "models/registry.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "ops/embedding.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe::witness {

namespace {
class BiLstmClassifier : public nn::Module {
 public:
  BiLstmClassifier(int64_t vocab, int64_t embed, int64_t hidden) : hidden_(hidden) {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab, embed));
    lstm_ = register_module("lstm", std::make_shared<nn::LSTM>(embed, hidden, 1, true));
    drop_ = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(2 * hidden, 1));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor e = (*embedding_)(ids);
    LstmResult r;
    {
      NvtxRange range(lstm_->range_name().c_str());
      r = lstm_->run(e);
    }
    // h [2, N, H]: the forward direction's state after the last step and the backward direction's
    // after the first, side by side as Keras' Bidirectional(merge_mode='concat') gives them.
    Tensor last = reshape(transpose(r.h, 0, 1), Shape{ids.size(0), 2 * hidden_});
    return (*fc_)((*drop_)(last));
  }
  std::string type_name() const override { return "BiLstmClassifier"; }

 private:
  int64_t hidden_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::Linear> fc_;
};

class FastText : public nn::Module {
 public:
  FastText(int64_t vocab, int64_t embed) {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(vocab, embed));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(embed, 1));
  }
  Tensor forward(const Tensor& ids) override { return (*fc_)(mean((*embedding_)(ids), 1)); }
  std::string type_name() const override { return "FastText"; }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::Linear> fc_;
};

class CharModel : public nn::Module {
 public:
  explicit CharModel(int64_t chars) : chars_(chars) {
    LOUPE_CHECK(chars >= 1 && chars <= models::kCharLstmMaxChars, "char_lstm reads texts of 1 to ", models::kCharLstmMaxChars,
                " distinct characters, not ", chars);
    lstm_ = register_module("lstm", std::make_shared<nn::LSTM>(chars, 128));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(128, chars));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor x = one_hot(ids, chars_);  // [N, 40, C], no gradient
    LstmResult r;
    {
      NvtxRange range(lstm_->range_name().c_str());
      r = lstm_->run(x);
    }
    return (*fc_)(reshape(r.h, Shape{ids.size(0), 128}));  // h [1, N, 128]: the state after the last character
  }
  std::string type_name() const override { return "CharLstm(" + std::to_string(chars_) + " characters)"; }

 private:
  int64_t chars_;
  std::shared_ptr<nn::LSTM> lstm_;
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace

std::shared_ptr<nn::Module> defined_reference_model(const std::string& name, int64_t vocab) {
  if (name == "mnist_mlp") {
    auto s = std::make_shared<nn::Sequential>();
    s->add("flatten", std::make_shared<nn::Flatten>())
        .add("fc1", std::make_shared<nn::Linear>(784, 512))
        .add("relu1", std::make_shared<nn::ReLU>())
        .add("drop1", std::make_shared<nn::Dropout>(0.2))
        .add("fc2", std::make_shared<nn::Linear>(512, 512))
        .add("relu2", std::make_shared<nn::ReLU>())
        .add("drop2", std::make_shared<nn::Dropout>(0.2))
        .add("fc3", std::make_shared<nn::Linear>(512, 10));
    return s;
  }
  if (name == "mnist_cnn") {
    auto s = std::make_shared<nn::Sequential>();
    s->add("to_chw", std::make_shared<nn::Reshape>(Shape{1, 28, 28}))
        .add("conv1", std::make_shared<nn::Conv2d>(1, 32, 3))
        .add("relu1", std::make_shared<nn::ReLU>())
        .add("conv2", std::make_shared<nn::Conv2d>(32, 64, 3))
        .add("relu2", std::make_shared<nn::ReLU>())
        .add("pool", std::make_shared<nn::MaxPool2d>(2))
        .add("drop1", std::make_shared<nn::Dropout>(0.25))
        .add("flatten", std::make_shared<nn::Flatten>())
        .add("fc1", std::make_shared<nn::Linear>(9216, 128))
        .add("relu3", std::make_shared<nn::ReLU>())
        .add("drop2", std::make_shared<nn::Dropout>(0.5))
        .add("fc2", std::make_shared<nn::Linear>(128, 10));
    return s;
  }
  if (name == "cifar10_cnn") {
    auto s = std::make_shared<nn::Sequential>();
    s->add("conv1", std::make_shared<nn::Conv2d>(3, 32, 3, 1, nn::same(3)))
        .add("relu1", std::make_shared<nn::ReLU>())
        .add("conv2", std::make_shared<nn::Conv2d>(32, 32, 3))
        .add("relu2", std::make_shared<nn::ReLU>())
        .add("pool1", std::make_shared<nn::MaxPool2d>(2))
        .add("drop1", std::make_shared<nn::Dropout>(0.25))
        .add("conv3", std::make_shared<nn::Conv2d>(32, 64, 3, 1, nn::same(3)))
        .add("relu3", std::make_shared<nn::ReLU>())
        .add("conv4", std::make_shared<nn::Conv2d>(64, 64, 3))
        .add("relu4", std::make_shared<nn::ReLU>())
        .add("pool2", std::make_shared<nn::MaxPool2d>(2))
        .add("drop2", std::make_shared<nn::Dropout>(0.25))
        .add("flatten", std::make_shared<nn::Flatten>())
        .add("fc1", std::make_shared<nn::Linear>(2304, 512))
        .add("relu5", std::make_shared<nn::ReLU>())
        .add("drop3", std::make_shared<nn::Dropout>(0.5))
        .add("fc2", std::make_shared<nn::Linear>(512, 10));
    return s;
  }
  if (name == "imdb_bilstm") return std::make_shared<BiLstmClassifier>(vocab, 128, 64);
  if (name == "imdb_fasttext") return std::make_shared<FastText>(vocab, 50);
  if (name == "char_lstm") return std::make_shared<CharModel>(vocab);
  LOUPE_FAIL("no definition of '", name, "'");
}

}  // namespace loupe::witness
