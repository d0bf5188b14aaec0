// A reference model ready to train, evaluate or sample from: the model built from its registry
// entry and moved to the device, its memory format, its recipe's optimizer, the trainer with the
// recipe's loss, and checkpoints (resume restores the run's seed and random stream). `loupe train`,
// `eval`, `generate`, `bench`, the loader benchmark and the tests all build a model this way, so
// the policy (which models run channels-last, what a resume restores) is written once, here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "models/registry.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace loupe::models {

struct SessionOptions {
  Device device = kCPU;
  // Precision, graph mode, divergence policy; the loss is always the recipe's (ModelInfo::recipe.loss).
  // Precision unset: the precision of the scope the session is made in.
  train::TrainerOptions trainer;
  double lr = 0;        // 0: the recipe's
  uint64_t seed = 1;    // the weights' seed (the default generator is seeded with it before the build)
  // The data's input size, for the models sized by their data (fastText's vocabulary, char_lstm's
  // characters); 0, or a model of fixed size: the model's reference size (ModelInfo::vocab).
  int64_t vocab = 0;
  bool channels_last = false;  // asked for (--channels-last): see wants_channels_last
  // The batch the run steps at (--batch; 0: the recipe's): the memory check before the build
  // (models/memory.h) counts the activations at it.
  int64_t batch = 0;
  // What the data's token ids mean (tools' Data::chars, Data::words; CheckpointMeta's): saved with
  // the weights, and a checkpoint whose table differs is refused by resume() and load_weights().
  std::string chars, words;
};

// "" when the tables agree or either side has none; else one sentence naming the checkpoint's
// table and the data's (their sizes, a preview, the characters or counts that differ).
std::string vocabulary_mismatch(const std::string& path, const train::CheckpointMeta& saved, const std::string& chars,
                                const std::string& words);
// The characters of a table in id order, readable in one line: "\n !\"'(),-.0123..." (control
// characters escaped; cut with "..." past `max` characters).
std::string preview_chars(const std::string& utf8, size_t max = 24);

// The memory-format policy: convolutions run channels-last (NHWC) when asked for, and always in
// fp16/bf16, where cuDNN's tensor-core kernels want NHWC (a 3x3 conv measured 382 TFLOP/s in f16
// NHWC against 163 in f16 NCHW on an H200). Only a model with convolutions (4-D weights) has a
// memory format to speak of.
bool wants_channels_last(const nn::Module& model, Precision precision, bool asked);

class Session {
 public:
  explicit Session(const ModelInfo& info, SessionOptions o = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelInfo& info() const { return info_; }
  Device device() const { return options_.device; }
  Precision precision() const { return precision_; }
  nn::Module& model() { return *model_; }
  bool channels_last() const { return channels_last_; }
  double lr() const { return lr_; }
  // The run's seed: the one given, or after resume() the checkpoint's.
  uint64_t seed() const { return seed_; }
  // Made on first use (generate needs neither): the recipe's optimizer at lr() with its decay, and
  // the trainer over the model and that optimizer with the recipe's loss.
  optim::Optimizer& optimizer();
  train::Trainer& trainer();

  // Continues a run: weights and optimizer state from `path` (checked against the model's name),
  // and the run's seed and the default generator's position as they were when it was written
  // (dropout and the shuffle go on as if the run had not stopped). Returns the checkpoint's meta.
  train::CheckpointMeta resume(const std::string& path);
  // The weights alone (eval, generate).
  train::CheckpointMeta load_weights(const std::string& path);
  // Model, optimizer state and {name, epochs completed, seed, the generator's position}.
  void save(const std::string& path, int epochs_completed);
  // Epochs completed by the checkpoint resume() read (0 without one).
  int resumed_epochs() const { return resumed_epochs_; }
  // After resume(): global step numbers go on from epochs completed x steps per epoch
  // (Trainer::epoch_steps), so --profile-steps and the NVTX payloads count across the restart.
  void continue_global_step(int64_t steps_per_epoch);
  // After resume() or load_weights(): a sentence when the data has a table but the checkpoint
  // stores none (written before loupe stored them), so it could not be checked; "" otherwise.
  const std::string& unchecked_vocabulary() const { return unchecked_; }

 private:
  const ModelInfo& info_;
  SessionOptions options_;
  Precision precision_;
  double lr_;
  uint64_t seed_;
  int resumed_epochs_ = 0;
  std::string unchecked_;
  void check_model(const std::string& path, const train::CheckpointMeta& m) const;
  void check_vocabulary(const std::string& path, const train::CheckpointMeta& m);
  bool channels_last_ = false;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // destroyed after the trainer, which refers to it
  std::unique_ptr<train::Trainer> trainer_;
};

}  // namespace loupe::models
