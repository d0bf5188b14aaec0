// The training loop: data resident on the device, one step = gather batch -> forward -> loss ->
// backward -> fused update, with no host synchronisation inside a step (DESIGN.md principle 3).
// Loss sums and correct counts accumulate on the device and are read once per epoch.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace loupe::instrument { class EpochMonitor; }
namespace loupe::loader { class DataLoader; }

namespace loupe::train {

// Samples and labels held in one tensor each (uint8 images, uint8 or int32 labels) on a device;
// batches are gathered from it by index and converted to float (x * x_scale) on that device.
struct TensorDataset {
  Tensor x, y;
  double x_scale = 1.0 / 255.0;
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  TensorDataset to(Device d) const { return {x.to(d), y.to(d), x_scale}; }
};

struct EpochStats {
  int epoch = 0;
  int64_t steps = 0, samples = 0;
  bool interrupted = false;  // hooks.stop ended the epoch early
  double train_loss = 0, train_acc = 0, test_acc = -1;
  double train_seconds = 0, eval_seconds = 0;
  std::optional<double> loss_scale;  // fp16: the GradScaler's scale at the epoch's end
  int64_t skipped_steps = 0;         // and the steps it skipped in this epoch
  double samples_per_sec() const { return train_seconds > 0 ? double(samples) / train_seconds : 0; }
};

// Per-step observers; all optional.
struct TrainHooks {
  instrument::EpochMonitor* monitor = nullptr;
  // Called after each step is issued: step (1-based), steps in the epoch, samples so far, and the
  // running mean loss when a recent one has arrived from the device (read about every 0.2 s
  // through pinned memory and an event, never by waiting for the GPU).
  std::function<void(int64_t step, int64_t total, int64_t samples, std::optional<double> loss)> on_step;
  // Global steps [first, last] (counted from 1 across epochs) bracketed by cudaProfilerStart/Stop.
  std::pair<int64_t, int64_t> profile_steps{-1, -1};
  // Called with true before the first and false after the last profiled step (for traces).
  std::function<void(bool)> on_profile;
  // Checked before each step (e.g. set by a SIGINT handler): the epoch ends early, cleanly.
  const std::atomic<bool>* stop = nullptr;
};

class Trainer {
 public:
  // With --precision fp16 the trainer scales the loss through a GradScaler (optim/grad_scaler.h)
  // and the optimizer skips the steps whose gradients overflowed, all on the device.
  Trainer(nn::Module& model, optim::Optimizer& opt, Device device);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  const optim::GradScaler* scaler() const { return scaler_.get(); }
  TrainHooks hooks;
  int64_t global_step() const { return global_step_; }
  // Keras' time-based decay: before each update, lr = base_lr / (1 + lr_decay * updates so far).
  double base_lr = 0, lr_decay = 0;
  void set_global_step(int64_t s) { global_step_ = s; }
  // One pass over `data` in shuffled batches of `batch` (the last one may be smaller). Stops after
  // max_steps steps when max_steps >= 0. With `cycle` (benchmarks: a timed stretch longer than the
  // data set), it runs exactly max_steps steps, starting over in the same order at the end.
  EpochStats train_epoch(const TensorDataset& data, int64_t batch, uint64_t seed, int epoch, int64_t max_steps = -1,
                         bool cycle = false);
  // The same through the asynchronous loader (its batch size, order and device).
  EpochStats train_epoch(loader::DataLoader& loader, int epoch, int64_t max_steps = -1);
  // Accuracy on `data` in eval mode, no gradients.
  double evaluate(const TensorDataset& data, int64_t batch = 1000);

 private:
  // One batch source for both paths: fills x, y and the batch size, or returns false at the end;
  // `done` runs after the step using the batch has been issued.
  using NextBatch = std::function<bool(Tensor& x, Tensor& y, int64_t& size)>;
  EpochStats run_epoch(int epoch, int64_t total, const NextBatch& next, const std::function<void()>& done);
  nn::Module& model_;
  optim::Optimizer& opt_;
  Device device_;
  int64_t global_step_ = 0;
  std::unique_ptr<optim::GradScaler> scaler_;
  int64_t skipped_before_ = 0;  // the scaler's skipped count at the end of the previous epoch
};

// Host wall-clock seconds.
double now_seconds();

}  // namespace loupe::train
