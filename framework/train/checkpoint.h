// Model and optimizer state to and from a checkpoint file (train/checkpoint_file.h's format).
#pragma once
#include <functional>
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
  // What the data's token ids mean, so that weights are never used with data whose ids mean other
  // things. Optional metadata ("chars", "words"): checkpoints written before them lack them and
  // still load, and an older loupe ignores them. Empty when not stored.
  std::string chars;  // a character model's table: its characters in id order, as UTF-8
  std::string words;  // a word model's vocabulary: a fingerprint (counts and a CRC32 of the words)
};

// Writes parameters ("model/<name>"), optimizer state ("optim/<name>") and meta, atomically.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const CheckpointMeta& meta);
// Loads into an existing model (and optimizer, when given); checks model name, names, shapes,
// dtypes and byte counts of every tensor and the range of every metadata number, each failure an
// Error naming the file and the field.
// `check`, when given, sees the model name and the vocabulary (chars, words; the numbers are not
// yet read) before any tensor is: a vocabulary mismatch explains more than the shape error that
// would follow.
CheckpointMeta load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* opt,
                               const std::string& expected_model,
                               const std::function<void(const CheckpointMeta&)>& check = {});
// The metadata alone (model name checked when expected_model is given), for sizing a model
// before its weights are loaded. Reads the whole file: meant for small checkpoints.
CheckpointMeta read_checkpoint_meta(const std::string& path, const std::string& expected_model);

}  // namespace loupe::train
