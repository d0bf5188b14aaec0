// The data sets the `loupe` command trains on, by the model's recipe: MNIST-format (MNIST,
// Fashion-MNIST) and CIFAR-10, from files or synthetic with the real shapes, or image folders
// (--data DIR with DIR/train/<class>/*.png|jpg and DIR/test/<class>/...) read at the recipe's shape;
// IMDb reviews (aclImdb) as padded word-id sequences, with or without fastText's bigrams; and a
// character corpus (any UTF-8 text) as windows of 40 characters predicting the next.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "data/char_corpus.h"
#include "data/synthetic.h"
#include "loader/dataset.h"
#include "models/registry.h"
#include "train/trainer.h"

namespace loupe::run {

struct DataRequest {
  std::string dataset;  // the recipe's: "mnist", "cifar10", "imdb", "imdb_bigrams" or "chars"
  std::string dir;      // --data, or "" for the default search; with train/ and test/: image folders
  bool synthetic = false;
  data::SyntheticKind synthetic_kind = data::SyntheticKind::Random;
  bool augment = false;   // the recipe's augmentation (loader path only)
  bool resident = false;  // keep the training set on the device instead of the loader's host copy
  double val_split = 0;   // NumPy arrays without test arrays: the last this share of the training ones
  // "arrays" (a model file's own data): the input per sample, the classes (0: a regression of
  // `outputs` float targets per sample), token ids or values.
  std::vector<int64_t> input_shape;
  int64_t classes = 0, outputs = 0;
  bool token_ids = false;
  int64_t vocab = 0;  // token ids: the Embedding's input_dim (synthetic ids stay below it)
};

struct Data {
  train::TensorDataset train, test;              // train is filled only when resident
  std::shared_ptr<loader::Dataset> host;         // the training set for the loader (not resident)
  std::string description;
  int64_t vocab = 0;                             // text: the embedding's (or one-hot's) input size
  std::shared_ptr<const data::CharCorpus> corpus;  // "chars": the text and its characters
  // What the ids mean, stored in checkpoints and checked against them (models::SessionOptions):
  // "chars": the characters in id order, UTF-8; the IMDb sets: the vocabulary's fingerprint
  // (data::ImdbSequences::vocab_fingerprint), empty for synthetic sequences, which have no words.
  std::string chars, words;
};

// What `info` asks of its data (the recipe's data set; a model file's input, classes, outputs, token
// ids and vocabulary), the options' fields left at their defaults. A file that names no loss is
// refused here, before its data are read, since the loss decides how (labels or targets).
DataRequest request_for(const models::ModelInfo& info);

Data load_data(const DataRequest& r, Device dev);

// Where a data set is read from when no --data is given: the folders (or the text file) that exist
// of those load_data searches, for the recipe's data set ("": a model file's, which may read
// MNIST's or CIFAR-10's). Synthetic data reads none, but its folders hold no output either.
std::vector<std::string> default_data_paths(const std::string& dataset);

}  // namespace loupe::run
