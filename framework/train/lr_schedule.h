// Learning-rate schedules with Keras's and PyTorch's formulas, and Keras's ReduceLROnPlateau
// (docs/cli.md, "Training controls"). A schedule is a function of `t`: the updates issued before
// this one (Keras's optimizer.iterations), or the epochs completed for a schedule stepped per epoch
// (PyTorch's StepLR).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "optim/lr_curve.h"

namespace loupe::train {

struct LrSchedule {
  enum class Kind { Constant, Exponential, InverseTime, Piecewise, Cosine };
  Kind kind = Kind::Constant;
  double initial = 1e-3;     // initial_learning_rate (PyTorch: the optimizer's lr)
  double decay_steps = 1;    // Exponential, InverseTime, Cosine (StepLR: step_size, per epoch)
  double decay_rate = 1;     // Exponential (StepLR: gamma), InverseTime
  bool staircase = false;    // the exponent (or InverseTime's quotient) floored
  double alpha = 0;          // Cosine: the floor, a fraction of the rate it decays from
  double warmup_target = std::numeric_limits<double>::quiet_NaN();  // Cosine: NaN, no warm-up
  double warmup_steps = 0;
  std::vector<double> boundaries, values;  // Piecewise: values[i] up to boundaries[i] included
  bool per_epoch = false;
};

// The rate at `t` (t >= 0): optim::curve_rate of the schedule's curve from `initial`, the
// function the update kernels evaluate.
double lr_at(const LrSchedule& s, double t);

// The curve that the update kernels evaluate (optim/lr_curve.h), from the optimizer's base rate,
// which is `initial` (Optimizer::set_lr): t counts updates, or for a per-epoch schedule epochs of
// `updates_per_epoch` updates. Piecewise values and the cosine's warm-up target are absolute rates
// (Keras), which the base rate does not scale. More than LrCurve::kMaxBoundaries boundaries: an Error.
optim::LrCurve lr_curve(const LrSchedule& s, double updates_per_epoch = 1);

// `--lr-schedule SPEC`: KIND:key=value,... with the keys of Keras's (and for `step`, PyTorch's)
// arguments; lists separated by '/'. `initial` is the run's --lr (or the recipe's):
//   exponential:decay_steps=1000,decay_rate=0.96[,staircase]
//   inverse_time:decay_steps=1000,decay_rate=0.5[,staircase]
//   cosine:decay_steps=10000[,alpha=0.01][,warmup_target=0.01,warmup_steps=500]
//   piecewise:boundaries=1000/2000,values=0.1/0.01/0.001
//   step:step_size=10,gamma=0.5            (per epoch, as PyTorch's StepLR)
// A bad spec: an Error naming --lr-schedule, what is wrong, and an example.
LrSchedule parse_lr_schedule(const std::string& spec, double initial);

// Keras's ReduceLROnPlateau, fed the monitored figure at each epoch's end: after `patience` epochs
// without an improvement of more than `min_delta`, the rate is multiplied by `factor` (down to
// `min_lr`), then `cooldown` epochs pass before it is judged again.
struct PlateauOptions {
  double factor = 0.1;
  int patience = 10;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
  bool maximize = false;  // a figure that should grow (accuracy); else it should fall (loss)
};

class Plateau {
 public:
  explicit Plateau(PlateauOptions o);
  // The rate for the next epoch, given this epoch's figure and rate.
  double epoch_end(double figure, double lr);
  int waited() const { return wait_; }

 private:
  PlateauOptions o_;
  double best_;
  int wait_ = 0, cooldown_left_ = 0;
};

// `plateau:factor=0.5,patience=3[,min_delta=1e-4][,cooldown=0][,min_lr=1e-5][,mode=max]`.
PlateauOptions parse_plateau(const std::string& spec);
// Whether an --lr-schedule spec is the plateau kind (parse_plateau's) rather than a curve.
bool is_plateau(const std::string& spec);

}  // namespace loupe::train
