#include "train/divergence.h"

#include <cmath>

#include "core/text.h"

namespace loupe::train {

namespace {

std::string pct1(double v) { return fmt("%.1f%%", 100 * v); }

}  // namespace

void EpochHistory::add(int epoch, double loss, double test_acc) {
  ++epochs;
  if (std::isfinite(loss) && loss < lowest_loss) lowest_loss = loss;
  if (test_acc > best_acc) {
    best_acc = test_acc;
    best_acc_epoch = epoch;
  }
}

EpochJudgment judge_epoch(const EpochHistory& earlier, double loss, double test_acc, int64_t classes,
                          int64_t test_samples) {
  EpochJudgment j;
  if (!std::isfinite(loss)) return j;
  const std::string c = std::to_string(classes);
  const double chance_loss = classes >= 2 ? std::log(double(classes)) : 0;
  if (classes >= 2 && loss > kLossChanceFactor * chance_loss) {
    j = {Divergence::LossFarPastChance, loss, kLossChanceFactor * chance_loss, ""};
    j.what = "its mean loss " + fmt("%.4g", loss) + " is past " + fmt("%.4g", j.bound) + " (" +
             fmt("%g", kLossChanceFactor) + " x ln " + c + "; a model at chance over " + c + " classes has " +
             fmt("%.3g", chance_loss) + ")";
    return j;
  }
  if (earlier.epochs > 0 && loss > kLossGrowth * earlier.lowest_loss && loss > chance_loss) {
    j = {Divergence::LossGrewPastChance, loss, kLossGrowth * earlier.lowest_loss, ""};
    j.what = "its mean loss " + fmt("%.4g", loss) + " is past " + fmt("%.4g", j.bound) + " (" +
             fmt("%g", kLossGrowth) + " x the lowest earlier epoch's, " + fmt("%.4g", earlier.lowest_loss) + ")" +
             (classes >= 2 ? " and past a model at chance's " + fmt("%.3g", chance_loss) : std::string());
    return j;
  }
  if (classes >= 2 && test_samples >= kMinTestSamples && earlier.epochs > 0) {
    const double chance = 1.0 / double(classes);
    const double at = chance + kAtChance * (1 - chance), above = chance + kAboveChance * (1 - chance);
    if (test_acc <= at && earlier.best_acc >= above) {
      j = {Divergence::AccuracyFellToChance, test_acc, at, ""};
      j.what = "its test accuracy " + pct1(test_acc) + " is at chance (1 in " + c + "; at most " + pct1(at) +
               ") after " + pct1(earlier.best_acc) + " in epoch " + std::to_string(earlier.best_acc_epoch);
    }
  }
  return j;
}

}  // namespace loupe::train
