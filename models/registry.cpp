#include "models/registry.h"

#include "core/error.h"

namespace loupe::models {

const std::vector<ModelInfo>& all_models() {
  static const std::vector<ModelInfo> models{mnist_mlp(),   mnist_cnn(),     cifar10_cnn(),
                                             imdb_bilstm(), imdb_fasttext(), char_lstm()};
  return models;
}

const ModelInfo& find_model(const std::string& name) {
  std::string known;
  for (const ModelInfo& m : all_models()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw Error("unknown model '" + name + "'; the models are: " + known + " (see `loupe models`)");
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Recipe& r, nn::ParameterArena& arena, double lr) {
  if (r.optimizer == "rmsprop") return std::make_unique<optim::RMSprop>(arena, lr, r.rho, r.eps);
  if (r.optimizer == "adam") return std::make_unique<optim::Adam>(arena, lr, r.beta1, r.beta2, r.eps);
  if (r.optimizer == "adadelta") return std::make_unique<optim::Adadelta>(arena, lr, r.rho, r.eps);
  if (r.optimizer == "sgd") return std::make_unique<optim::SGD>(arena, lr, r.momentum);
  LOUPE_FAIL("recipe names an unknown optimizer '", r.optimizer, "'");
}

}  // namespace loupe::models
