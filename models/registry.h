// The reference models by name, each with its recipe (docs/reference-models.md).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/loss.h"
#include "train/lr_schedule.h"

namespace loupe::models {
namespace keras {
struct KerasWeights;
}

struct Recipe {
  std::string optimizer;  // "rmsprop", "adam", "sgd", "adadelta"
  double lr = 1e-3;
  double rho = 0.9, eps = 1e-7;         // RMSprop, Adadelta
  double beta1 = 0.9, beta2 = 0.999;    // Adam
  double momentum = 0;                  // SGD
  double decay = 0;                     // Keras' lr decay: lr / (1 + decay * updates so far)
  // The rate as a function of the updates issued (train/lr_schedule.h): Constant (`lr` throughout)
  // unless a model file's optimizer has a Keras schedule as its learning_rate (docs/keras.md), whose
  // initial rate `lr` then is (a PiecewiseConstantDecay's first value). Never with `decay` > 0.
  train::LrSchedule schedule;
  bool augment = false;                 // the data set's training augmentation
  // What the trainer minimises (train/loss.h): cross-entropy over the classes, or binary
  // cross-entropy with logits for a model with one output column (Keras' Dense(1, sigmoid)).
  train::Loss loss = train::Loss::CrossEntropy;
  int64_t batch = 128;
  int epochs = 10;
  // "mnist" (MNIST-format: MNIST or Fashion-MNIST), "cifar10", "imdb" (maxlen 100),
  // "imdb_bigrams" (maxlen 400, fastText's bigrams) or "chars" (windows of 40 characters)
  std::string dataset;
};

// What one layer of a model costs before anything is built (docs/reliability.md, "Memory checked
// first"): its parameters (loupe's count) and the values its output holds per sample.
struct LayerCost {
  std::string layer;  // the layer's name as the model file has it
  int64_t parameters = 0;
  int64_t activations = 0;
};

struct ModelInfo {
  std::string name, description;
  // What a checkpoint of the model is tied to where it is not the name: a model file's is a hash of
  // its architecture ("keras:" and 16 hex digits), so that another path to it, a copy or a
  // re-indented file resumes its checkpoints and another architecture's are refused.
  std::string identity;
  const std::string& checkpoint_name() const { return identity.empty() ? name : identity; }
  Recipe recipe;
  // Some models take their input size from the data: fastText's vocabulary grows with the training
  // bigrams, char_lstm's with the corpus' characters. `vocab` is that size for the reference data
  // set (0 for fixed models) and the parameter count is for it.
  int64_t vocab = 0;
  int64_t expected_parameters = 0;
  // A model from a Keras file (models/keras_json.h): the parameter count Keras prints (its LSTM has
  // one bias where cuDNN's layout has two; its BatchNormalization counts the moving mean and
  // variance), and where the recipe came from. 0 and "" for the reference models.
  int64_t keras_parameters = 0;
  std::string keras_parameters_why;  // why the two counts differ, where they do
  std::string recipe_source;
  // A model file's last activation (softmax, sigmoid or linear; "" for the reference models, whose
  // last layer gives the logits their loss takes), and why its loss is unknown: a linear last layer
  // in a file that names no loss (--loss names it; models::Session refuses the model until then).
  std::string output_activation;
  std::string loss_missing;
  int64_t outputs = 0;  // a model file's output units (0 for the reference models)
  // A model file's input per sample as Keras has it, its classes (2 for one sigmoid output), and
  // whether it takes token ids (an Embedding first): what its NumPy arrays must hold (recipe.dataset
  // "arrays").
  std::vector<int64_t> input_shape;
  int64_t classes = 0;
  bool token_ids = false;
  // Layer by layer, for the memory estimate made before build() (models/memory.h); empty where
  // unknown. The parameters of a data-sized layer are those for `vocab`.
  std::vector<LayerCost> costs;
  // A model file's layers that hold trained variables: the module each is (its name in the built
  // model) and Keras's variables for it (models/keras_weights.h). Empty for the reference models.
  std::vector<std::pair<std::string, std::shared_ptr<const keras::KerasWeights>>> keras_weights;
  // Every layer of a model file, its class and name in the file's order: Keras 3 numbers its
  // weight groups by class over all of them, weightless ones included (models/keras_weights.h).
  std::vector<std::pair<std::string, std::string>> keras_layers;
  // A .keras file's trained weights: the file itself (models/keras_weights.h reads them from it);
  // "" where the model comes without weights.
  std::string own_weights;
  // A model file's model config as the file has it (a .keras file's config.json, or what Keras's
  // to_json() wrote): what a .keras file loupe writes holds (models/keras_weights.h). "" for the
  // reference models.
  std::string keras_config;
  std::function<std::shared_ptr<nn::Module>(int64_t vocab)> build_for;  // weights from the default generator
  std::shared_ptr<nn::Module> build() const { return build_for(vocab); }
};

const std::vector<ModelInfo>& all_models();
// Throws a user-facing Error that lists the known names.
const ModelInfo& find_model(const std::string& name);
std::unique_ptr<optim::Optimizer> make_optimizer(const Recipe& r, nn::ParameterArena& arena, double lr);
// `r` with the optimizer `name` (adam, rmsprop, sgd or adadelta) and Keras's defaults for it
// (learning rate, rho, betas, epsilon; no momentum, no decay); the loss, batch, epochs and data set
// stay. An Error naming the four for any other name.
Recipe with_optimizer(Recipe r, const std::string& name);

// char_lstm's one-hot input costs 128 x 40 floats per distinct character per batch (84 MB at
// this limit) and 4 x 128 weights per character in the LSTM and 128 in the dense layer: texts
// with more distinct characters (e.g. 60,000 in a file of every CJK ideograph) are refused.
constexpr int64_t kCharLstmMaxChars = 4096;

// One function per reference model (models/reference_models.cpp; its layers from models/keras/NAME.json).
ModelInfo mnist_mlp();
ModelInfo mnist_cnn();
ModelInfo cifar10_cnn();
ModelInfo imdb_bilstm();
ModelInfo imdb_fasttext();
ModelInfo char_lstm();

}  // namespace loupe::models
