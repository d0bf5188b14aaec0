// The models the checkpoint target loads into, shared with make_corpus.cpp so that the seed
// checkpoints it writes are of exactly these models: imdb_fasttext from the registry at a
// vocabulary of 4 (Adam), and a small CNN with a BatchNorm's buffers (RMSprop).
#pragma once
#include <memory>
#include <string>

#include "models/registry.h"
#include "nn/layers.h"
#include "optim/optimizer.h"

namespace loupe::fuzz {

struct FuzzModel {
  std::string name;  // the model name a checkpoint of it holds
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
};

inline FuzzModel fasttext_model() {
  const models::ModelInfo& ft = models::find_model("imdb_fasttext");
  FuzzModel m{ft.name, ft.build_for(4), nullptr};
  m.model->to(kCPU);
  m.opt = models::make_optimizer(ft.recipe, m.model->arena(), ft.recipe.lr);
  return m;
}

inline FuzzModel tiny_cnn_model() {
  auto cnn = std::make_shared<nn::Sequential>();
  cnn->add("conv", std::make_shared<nn::Conv2d>(1, 2, 3))
      .add("bn", std::make_shared<nn::BatchNorm2d>(2))
      .add("relu", std::make_shared<nn::ReLU>())
      .add("flat", std::make_shared<nn::Flatten>())
      .add("fc", std::make_shared<nn::Linear>(8, 3));
  FuzzModel m{"tiny_cnn", cnn, nullptr};
  m.model->to(kCPU);
  m.opt = std::make_unique<optim::RMSprop>(m.model->arena(), 1e-3);
  return m;
}

}  // namespace loupe::fuzz
