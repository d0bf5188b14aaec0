// char_lstm: the Keras text-generation example. One-hot characters (windows of 40) -> LSTM 128
// (its output after the last character) -> Dense C softmax; RMSprop lr 1e-2; batch 128; 10 epochs.
// C, the number of distinct characters, comes from the corpus (57 in the Nietzsche text).
// `loupe generate char_lstm` samples from a trained model.
#include "core/error.h"
#include "core/nvtx.h"
#include "models/registry.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "ops/embedding.h"
#include "ops/view.h"

namespace loupe::models {

namespace {
class CharModel : public nn::Module {
 public:
  explicit CharModel(int64_t chars) : chars_(chars) {
    LOUPE_CHECK(chars >= 1 && chars <= kCharLstmMaxChars, "char_lstm reads texts of 1 to ", kCharLstmMaxChars,
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

ModelInfo char_lstm() {
  ModelInfo m;
  m.name = "char_lstm";
  m.description = "LSTM 128 over one-hot characters -> dense softmax (Keras lstm_text_generation.py)";
  m.recipe.optimizer = "rmsprop";
  m.recipe.lr = 1e-2;
  m.recipe.rho = 0.9;
  m.recipe.eps = 1e-7;
  m.recipe.batch = 128;
  m.recipe.epochs = 10;
  m.recipe.dataset = "chars";
  m.vocab = 57;
  // LSTM 4*128*(57 + 128) + 8*128 (two bias vectors) + dense 128*57 + 57.
  m.expected_parameters = 4 * 128 * (57 + 128) + 8 * 128 + 128 * 57 + 57;
  m.build_for = [](int64_t vocab) { return std::make_shared<CharModel>(vocab); };
  return m;
}

}  // namespace loupe::models
