// A run whose loss stays finite can still have diverged: at --lr 1000 mnist_mlp's loss is 1e14
// and its accuracy 10%, and it used to train on, exit 0 and save those weights. The trainer sees
// only NaN and infinity (EpochStats::diverged); this judges each finished epoch from its mean
// training loss and its test accuracy against the loss and accuracy of a model at chance, which
// depend only on the number of classes (C): a model that predicts every class alike has
// cross-entropy ln(C) and accuracy 1/C on balanced data. The judgment is a pure function of
// numbers every data-parallel rank holds alike (world-reduced), so the ranks stop together.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

namespace loupe::train {

// An epoch's loss past this many times ln(C) has diverged whatever came before (the first epoch
// too): a fresh model starts at about ln(C), and a real recipe's epoch mean is below it.
constexpr double kLossChanceFactor = 100;
// An epoch's loss past this many times the lowest earlier epoch's, and past ln(C), has diverged:
// training loss falls epoch by epoch (dropout and augmentation shake it by percents, not tenfold),
// and above ln(C) the model is no better than one at chance.
constexpr double kLossGrowth = 10;
// Accuracy in units of the way from chance (1/C) to perfect (1): an epoch at most this far above
// chance is "at chance" (C = 10: <= 14.5%; C = 2: <= 52.5%) ...
constexpr double kAtChance = 0.05;
// ... and it counts as divergence only after an earlier epoch was at least this far (C = 10: >= 37%;
// C = 2: >= 65%): a run that never learned (random labels, a too-small model) is not one that diverged.
constexpr double kAboveChance = 0.3;
// Below this many test samples the accuracy is too noisy (one sample of 100 is 1%) to judge.
constexpr int64_t kMinTestSamples = 100;

// The earlier epochs of this run (this process: a resumed run starts afresh).
struct EpochHistory {
  int epochs = 0;
  double lowest_loss = std::numeric_limits<double>::infinity();
  double best_acc = -1;
  int best_acc_epoch = 0;
  void add(int epoch, double loss, double test_acc);
};

enum class Divergence {
  None,
  LossFarPastChance,    // loss > kLossChanceFactor * ln(C)
  LossGrewPastChance,   // loss > kLossGrowth * the lowest earlier, and > ln(C)
  AccuracyFellToChance  // test accuracy at chance after an earlier epoch well above it
};

struct EpochJudgment {
  Divergence kind = Divergence::None;
  double value = 0, bound = 0;  // the loss or accuracy, and the bound it crossed
  // One clause for the message, e.g. "its mean loss 3.8e+14 is past 230 (100 x ln 10: a model at
  // chance has 2.30)"; empty when the epoch is fine.
  std::string what;
  explicit operator bool() const { return kind != Divergence::None; }
};

// classes: the model's C (Trainer::classes()); 0 when unknown: then only the relative loss rule
// applies, without its ln(C) floor. A non-finite loss is the trainer's to report, not judged here.
EpochJudgment judge_epoch(const EpochHistory& earlier, double loss, double test_acc, int64_t classes,
                          int64_t test_samples);

}  // namespace loupe::train
