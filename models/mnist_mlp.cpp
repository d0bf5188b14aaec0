// mnist_mlp: the Keras example's MLP. Flatten 784 -> Dense 512 ReLU -> Dropout .2 -> Dense 512 ReLU
// -> Dropout .2 -> Dense 10; RMSprop lr 1e-3, rho .9, eps 1e-7; batch 128; 20 epochs.
#include "nn/layers.h"
#include "models/registry.h"

namespace loupe::models {

ModelInfo mnist_mlp() {
  ModelInfo m;
  m.name = "mnist_mlp";
  m.description = "MLP 784-512-512-10 with dropout (Keras mnist_mlp.py)";
  m.recipe.optimizer = "rmsprop";
  m.recipe.lr = 1e-3;
  m.recipe.rho = 0.9;
  m.recipe.eps = 1e-7;
  m.recipe.batch = 128;
  m.recipe.epochs = 20;
  m.recipe.dataset = "mnist";
  m.expected_parameters = 669706;
  m.build_for = [](int64_t) {
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
  };
  return m;
}

}  // namespace loupe::models
