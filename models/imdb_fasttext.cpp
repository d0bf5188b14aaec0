// imdb_fasttext: the Keras example's fastText. Embedding Vx50 -> mean over the 400 positions
// (padding included, as GlobalAveragePooling1D without a mask) -> Dense 1 sigmoid (fused into the
// binary cross-entropy); Adam lr 1e-3; batch 32; 5 epochs. The ids are the 20,000 most frequent
// words plus every bigram of the training set from 20,001 on, so V (the largest id + 1) comes from
// the data: about 1.2 million on IMDb.
#include "models/registry.h"
#include "nn/layers.h"
#include "ops/reduce.h"

namespace loupe::models {

namespace {
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
}  // namespace

ModelInfo imdb_fasttext() {
  ModelInfo m;
  m.name = "imdb_fasttext";
  m.description = "fastText: embedding Vx50 of words and bigrams -> mean over time -> dense 1 (Keras imdb_fasttext.py)";
  m.recipe.optimizer = "adam";
  m.recipe.lr = 1e-3;
  m.recipe.batch = 32;
  m.recipe.epochs = 5;
  m.recipe.dataset = "imdb_bigrams";
  m.recipe.loss = train::Loss::BinaryCrossEntropyWithLogits;
  m.vocab = 1200000;
  m.expected_parameters = 1200000 * 50 + 51;
  m.build_for = [](int64_t vocab) { return std::make_shared<FastText>(vocab, 50); };
  return m;
}

}  // namespace loupe::models
