// Model and optimizer state to and from a checkpoint file (train/checkpoint_file.h's format).
#pragma once
#include <string>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/checkpoint_file.h"

namespace loupe::train {

// The most epochs a checkpoint may say were completed (a larger or negative count in a file is
// refused, as is any metadata field that is not wholly a number in its range).
constexpr int kMaxCheckpointEpoch = 1000000;

struct CheckpointMeta {
  std::string model;
  int epoch = 0;        // epochs completed
  uint64_t seed = 0;
  uint64_t rng_offset = 0;
};

// Writes parameters ("model/<name>"), optimizer state ("optim/<name>") and meta, atomically.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const CheckpointMeta& meta);
// Loads into an existing model (and optimizer, when given); checks model name, names, shapes,
// dtypes and byte counts of every tensor and the range of every metadata number, each failure an
// Error naming the file and the field.
CheckpointMeta load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* opt,
                               const std::string& expected_model);

}  // namespace loupe::train
