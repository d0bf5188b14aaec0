#include "models/registry.h"

#include <deque>
#include <mutex>

#include "core/error.h"
#include "models/keras_json.h"

namespace loupe::models {

const std::vector<ModelInfo>& all_models() {
  static const std::vector<ModelInfo> models{mnist_mlp(),   mnist_cnn(),     cifar10_cnn(),
                                             imdb_bilstm(), imdb_fasttext(), char_lstm()};
  return models;
}

const ModelInfo& find_model(const std::string& name) {
  if (is_model_file(name)) {  // a Keras model file: read once, kept for the process (references stay valid)
    static std::mutex mu;
    static std::deque<ModelInfo> files;
    std::lock_guard<std::mutex> lock(mu);
    for (const ModelInfo& m : files)
      if (m.name == name) return m;
    files.push_back(load_keras_model(name));
    return files.back();
  }
  std::string known;
  for (const ModelInfo& m : all_models()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw Error("unknown model '" + name + "'; the models are: " + known +
              " (see `loupe models`), or a Keras model file ending in .json (model.to_json()) or .keras (model.save)");
}

Recipe with_optimizer(Recipe r, const std::string& name) {
  const Recipe keras;  // the defaults every optimizer shares: eps 1e-7, betas .9/.999, no momentum or decay
  r.beta1 = keras.beta1, r.beta2 = keras.beta2, r.eps = 1e-7, r.momentum = 0, r.decay = 0;
  r.schedule = keras.schedule;  // a constant rate: the file's schedule was for its own optimizer
  if (name == "adam") r.lr = 1e-3;
  else if (name == "rmsprop") r.lr = 1e-3, r.rho = 0.9;
  else if (name == "sgd") r.lr = 0.01;
  else if (name == "adadelta") r.lr = 1e-3, r.rho = 0.95;
  else throw Error("--optimizer takes adam, rmsprop, sgd or adadelta, got '" + name + "'");
  r.optimizer = name;
  return r;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Recipe& r, nn::ParameterArena& arena, double lr) {
  if (r.optimizer == "rmsprop") return std::make_unique<optim::RMSprop>(arena, lr, r.rho, r.eps);
  if (r.optimizer == "adam") return std::make_unique<optim::Adam>(arena, lr, r.beta1, r.beta2, r.eps);
  if (r.optimizer == "adadelta") return std::make_unique<optim::Adadelta>(arena, lr, r.rho, r.eps);
  if (r.optimizer == "sgd") return std::make_unique<optim::SGD>(arena, lr, r.momentum);
  LOUPE_FAIL("recipe names an unknown optimizer '", r.optimizer, "'");
}

}  // namespace loupe::models
