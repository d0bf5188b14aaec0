// A Sequential model as Keras's `model.to_json()` writes it, as a loupe model (see docs/keras.md,
// "What is read"). Both layouts: Keras 2 (`config` a list of layers or {"layers": [...]}, the input
// in `batch_input_shape`) and Keras 3 (`module` / `registered_name`, an InputLayer with
// `batch_shape`, `build_config`, `compile_config`). The layers loupe has: InputLayer, Dense,
// Conv2D, MaxPooling2D, AveragePooling2D, BatchNormalization, Dropout, Flatten, Reshape,
// Activation, Embedding, LSTM, Bidirectional(LSTM), GlobalAveragePooling1D. Every option loupe
// cannot honour is refused by name in one sentence (an Error), never replaced silently.
//
// Keras's layout is channels-last; loupe's convolutions are channels-first, so an image is
// transposed once before the first layer that needs it (or arrives channels-first from loupe's
// data sets, which deliver CIFAR-10 that way). A Flatten after convolutions then takes the
// values in channel-first order; Keras's weights for the layer after it are taken in that order
// when they are loaded (models/keras_weights.h).
#pragma once
#include <string>

#include "models/registry.h"

namespace loupe::models {

// Whether `name` names a model file rather than a reference model: it ends in ".json" (Keras's
// `model.to_json()`) or ".keras" (Keras 3's `model.save`: a zip of config.json, metadata.json and
// model.weights.h5).
bool is_model_file(const std::string& name);
bool is_keras_archive(const std::string& name);  // ends in ".keras"
// What a file name made from a model's name uses: a model file's base name without ".json" or
// ".keras" ("runs/my_cnn.json" -> "my_cnn"), a reference model's name as it is.
std::string model_stem(const std::string& name);

// The model in `json` (the text of a model file; `name` for messages and the model's name).
// The recipe comes from the file's compile_config where it has one, else Keras's compile defaults
// (RMSprop, learning rate 0.001) with the loss its last layer implies; batch 32 and 1 epoch, as
// Keras's fit; ModelInfo::recipe_source says which. An optimizer's learning rate that is a Keras
// schedule (ExponentialDecay, InverseTimeDecay, PiecewiseConstantDecay, CosineDecay) is
// recipe.schedule, its initial rate recipe.lr (docs/keras.md, "Learning-rate schedules"). The data set is the reference one whose
// samples have the model's input shape and class count (MNIST's, CIFAR-10's, IMDb's), else none.
// `data_sized`: the reference models' own files (models/registry.h), whose build_for takes the
// data's vocabulary or alphabet in place of the file's size; a user's file refuses data that does
// not fit its sizes instead.
ModelInfo keras_model(const std::string& json, const std::string& name, bool data_sized = false);

// The same from a file (regular, at most 16 MiB: a model's architecture is kilobytes); from a
// .keras file, its config.json (through libzip, as .npz files are read), with
// ModelInfo::own_weights the file itself: its model.weights.h5 holds them.
ModelInfo load_keras_model(const std::string& path);

// `info` trained with the loss Keras calls `name` (categorical_crossentropy,
// sparse_categorical_crossentropy, binary_crossentropy or mean_squared_error / mse, as `--loss`
// gives it): on a softmax or sigmoid last layer as Keras applies it, on a linear one (and a
// reference model's) as logits; mean squared error as a model file's regression on its own NumPy
// arrays. An Error naming the four for another name, or for a loss the model does not fit.
ModelInfo with_loss(ModelInfo info, const std::string& name);
// An Error naming the losses loupe trains unless `name` is one of them (the command checks --loss
// before any work).
void check_loss_name(const std::string& name);

}  // namespace loupe::models
