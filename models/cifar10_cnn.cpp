// cifar10_cnn: the Keras example's CNN. Conv 32 3x3 same ReLU -> Conv 32 3x3 valid ReLU -> MaxPool 2
// -> Dropout .25 -> Conv 64 3x3 same ReLU -> Conv 64 3x3 valid ReLU -> MaxPool 2 -> Dropout .25 ->
// Flatten 2304 -> Dense 512 ReLU -> Dropout .5 -> Dense 10; RMSprop lr 1e-4, decay 1e-6 per step;
// batch 32; 20 epochs; random shifts of up to 10% and horizontal flips.
#include "models/registry.h"
#include "nn/layers.h"

namespace loupe::models {

ModelInfo cifar10_cnn() {
  ModelInfo m;
  m.name = "cifar10_cnn";
  m.description = "CNN 2x(conv-conv-maxpool) + dense 512 with dropout (Keras cifar10_cnn.py)";
  m.recipe.optimizer = "rmsprop";
  m.recipe.lr = 1e-4;
  m.recipe.decay = 1e-6;
  m.recipe.rho = 0.9;
  m.recipe.eps = 1e-7;
  m.recipe.batch = 32;
  m.recipe.epochs = 20;
  m.recipe.dataset = "cifar10";
  m.recipe.augment = true;
  m.expected_parameters = 1250858;
  m.build_for = [](int64_t) {
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
  };
  return m;
}

}  // namespace loupe::models
