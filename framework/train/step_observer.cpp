#include "train/step_observer.h"

#include <cmath>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "train/trainer.h"

namespace loupe::train {

namespace {
// cudaProfilerStart/Stop (and the caller's callback) around global steps [first, last].
class ProfileWindow final : public StepObserver {
 public:
  explicit ProfileWindow(const ObserverSetup& s) : s_(s) {}
  void before_step(int64_t step) override {
    if (step != s_.profile_steps.first) return;
    if (s_.device.is_cuda()) cuda_runtime()->profiler_start();
    if (s_.on_profile) s_.on_profile(true);
  }
  bool after_step(EpochStats&, int64_t step) override {
    if (step != s_.profile_steps.second) return false;
    if (s_.device.is_cuda()) cuda_runtime()->profiler_stop();
    if (s_.on_profile) s_.on_profile(false);
    return false;
  }

 private:
  const ObserverSetup& s_;
};

// The running loss for the progress bar and the divergence watch, read about every 0.2 s without
// waiting for the device: an asynchronous copy into pinned memory, polled through an event (on
// the CPU a plain read). A NaN or inf loss makes the sum NaN or inf from that step on.
class LossPeek final : public StepObserver {
 public:
  explicit LossPeek(const ObserverSetup& s)
      : s_(s), peek_(s.peek_buffer), time_(now_seconds()) {
    LOUPE_CHECK(!s.device.is_cuda() || peek_.defined(), "the loss peek needs the trainer's pinned buffer");
  }
  ~LossPeek() override { steps_end(); }
  bool after_step(EpochStats& st, int64_t step) override {
    const double now = now_seconds();
    if (!s_.device.is_cuda()) {
      if (now - time_ > 0.2) {
        loss_ = s_.loss_sum->item() / double(st.samples);
        step_ = step;
        time_ = now;
      }
      return false;
    }
    if (event_ && cuda_runtime()->event_done(event_)) {
      loss_ = double(*peek_.data<float>()) / double(samples_);
      cuda_runtime()->event_destroy(event_);
      event_ = nullptr;
    }
    if (!event_ && now - time_ > 0.2) {
      cuda_runtime()->copy_async_on(nullptr, peek_.data_ptr(), s_.loss_sum->data_ptr(), sizeof(float),
                                    CopyKind::DeviceToHost);
      event_ = cuda_runtime()->event_record_on(nullptr);
      samples_ = st.samples;
      step_ = step;
      time_ = now;
    }
    return false;
  }
  void steps_end() override {
    if (event_) cuda_runtime()->event_destroy(event_);
    event_ = nullptr;
  }
  std::optional<double> loss() const { return loss_; }
  int64_t step() const { return step_; }  // the step whose running loss loss() is

 private:
  const ObserverSetup& s_;
  Tensor peek_;
  void* event_ = nullptr;
  int64_t samples_ = 0, step_ = 0;
  double time_;
  std::optional<double> loss_;
};

// A running loss that is no longer finite: the run diverged (ended now with stop_on_divergence).
class DivergenceWatch final : public StepObserver {
 public:
  DivergenceWatch(const ObserverSetup& s, const LossPeek& peek) : s_(s), peek_(peek) {}
  bool after_step(EpochStats& st, int64_t) override {
    const std::optional<double> loss = peek_.loss();
    if (!loss || std::isfinite(*loss) || st.diverged || !s_.single_process) return false;
    st.diverged = true;
    st.diverged_step = peek_.step();
    return s_.stop_on_divergence;
  }

 private:
  const ObserverSetup& s_;
  const LossPeek& peek_;
};

// Any callback after each step: the ranks' weight check, the progress line.
class Callback final : public StepObserver {
 public:
  explicit Callback(std::function<void(EpochStats&)> f) : f_(std::move(f)) {}
  bool after_step(EpochStats& st, int64_t) override {
    f_(st);
    return false;
  }

 private:
  std::function<void(EpochStats&)> f_;
};
}  // namespace

std::vector<std::unique_ptr<StepObserver>> epoch_observers(const ObserverSetup& s) {
  std::vector<std::unique_ptr<StepObserver>> v;
  v.push_back(std::make_unique<ProfileWindow>(s));
  auto peek = std::make_unique<LossPeek>(s);
  const LossPeek& p = *peek;
  v.push_back(std::move(peek));
  v.push_back(std::make_unique<DivergenceWatch>(s, p));
  if (s.check_ranks) v.push_back(std::make_unique<Callback>([&s](EpochStats&) { s.check_ranks(); }));
  if (s.on_step)
    v.push_back(std::make_unique<Callback>([&s, &p](EpochStats& st) { s.on_step(st.steps, s.total, st.samples, p.loss()); }));
  return v;
}

}  // namespace loupe::train
