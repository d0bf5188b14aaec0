// mnist_cnn: the Keras example's CNN. Conv 32 3x3 valid ReLU -> Conv 64 3x3 valid ReLU ->
// MaxPool 2 -> Dropout .25 -> Flatten 9216 -> Dense 128 ReLU -> Dropout .5 -> Dense 10;
// Adadelta lr 1.0, rho .95, eps 1e-7; batch 128; 12 epochs.
#include "models/registry.h"
#include "nn/layers.h"

namespace loupe::models {

ModelInfo mnist_cnn() {
  ModelInfo m;
  m.name = "mnist_cnn";
  m.description = "CNN conv32-conv64-maxpool-dense128 with dropout (Keras mnist_cnn.py)";
  m.recipe.optimizer = "adadelta";
  m.recipe.lr = 1.0;
  m.recipe.rho = 0.95;
  m.recipe.eps = 1e-7;
  m.recipe.batch = 128;
  m.recipe.epochs = 12;
  m.recipe.dataset = "mnist";
  m.expected_parameters = 1199882;
  m.build_for = [](int64_t) {
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
  };
  return m;
}

}  // namespace loupe::models
