// imdb_bilstm: the Keras example's bidirectional LSTM. Embedding 20000x128 -> Bidirectional LSTM 64
// (the final states of both directions concatenated, 128) -> Dropout .5 -> Dense 1 sigmoid (fused
// into the binary cross-entropy); Adam lr 1e-3; batch 32; 4 epochs; reviews padded and truncated
// at the front to 100 tokens over the 20,000 most frequent training words.
#include "core/nvtx.h"
#include "models/registry.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "ops/view.h"

namespace loupe::models {

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
}  // namespace

ModelInfo imdb_bilstm() {
  ModelInfo m;
  m.name = "imdb_bilstm";
  m.description = "Embedding 20000x128 -> bidirectional LSTM 64 -> dropout -> dense 1 (Keras imdb_bidirectional_lstm.py)";
  m.recipe.optimizer = "adam";
  m.recipe.lr = 1e-3;
  m.recipe.batch = 32;
  m.recipe.epochs = 4;
  m.recipe.dataset = "imdb";
  m.recipe.loss = train::Loss::BinaryCrossEntropyWithLogits;
  m.vocab = 20000;
  // Keras counts 2,658,945: its LSTM has one bias vector per gate block, cuDNN's layout two.
  m.expected_parameters = 2659457;
  m.build_for = [](int64_t vocab) { return std::make_shared<BiLstmClassifier>(vocab, 128, 64); };
  return m;
}

}  // namespace loupe::models
