// The data sets the `loupe` command trains on, by the model's recipe: MNIST-format (MNIST,
// Fashion-MNIST) and CIFAR-10, from files or synthetic with the real shapes, or image folders
// (--data DIR with DIR/train/<class>/*.png|jpg and DIR/test/<class>/...) read at the recipe's shape.
#pragma once
#include <memory>
#include <string>

#include "core/dtype.h"
#include "data/synthetic.h"
#include "loader/dataset.h"
#include "train/trainer.h"

namespace loupe::tools {

struct DataRequest {
  std::string dataset;  // the recipe's: "mnist" or "cifar10"
  std::string dir;      // --data, or "" for the default search; with train/ and test/: image folders
  bool synthetic = false;
  data::SyntheticKind synthetic_kind = data::SyntheticKind::Random;
  bool augment = false;   // the recipe's augmentation (loader path only)
  bool resident = false;  // keep the training set on the device instead of the loader's host copy
};

struct Data {
  train::TensorDataset train, test;              // train is filled only when resident
  std::shared_ptr<loader::Dataset> host;         // the training set for the loader (not resident)
  std::string description;
};

Data load_data(const DataRequest& r, Device dev);

}  // namespace loupe::tools
