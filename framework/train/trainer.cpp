#include "train/trainer.h"

#include <chrono>
#include <cstdlib>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/precision.h"
#include "instrument/flops.h"
#include "instrument/monitor.h"
#include "instrument/nvtx.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/loss.h"

namespace loupe::train {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

EpochStats Trainer::train_epoch(const TensorDataset& data, int64_t batch, uint64_t seed, int epoch, int64_t max_steps,
                                bool cycle) {
  int64_t n = data.size();
  LOUPE_CHECK(n > 0 && batch > 0, "training needs a non-empty data set and a positive batch size");
  // The order is uploaded once per epoch, not per step.
  Tensor perm = from_vector(loader::epoch_permutation(n, seed, epoch), Shape{n}, device_);
  int64_t total = (n + batch - 1) / batch, start = 0;
  LOUPE_CHECK(!cycle || max_steps >= 0, "cycling through the data needs a step count");
  if (max_steps >= 0) total = cycle ? max_steps : std::min(total, max_steps);
  auto next = [&](Tensor& x, Tensor& y, int64_t& b) {
    if (start >= n && cycle) start = 0;
    if (start >= n) return false;
    int64_t end = std::min(n, start + batch);
    Tensor idx = perm.slice(0, start, end);
    x = index_select(data.x, idx, DType::f32, data.x_scale);
    y = index_select(data.y, idx, DType::i32);
    b = end - start;
    start = end;
    return true;
  };
  return run_epoch(epoch, total, next, [] {});
}

EpochStats Trainer::train_epoch(loader::DataLoader& dl, int epoch, int64_t max_steps) {
  LOUPE_CHECK(dl.options().device == device_, "the loader delivers to ", dl.options().device.str(),
              " but the model is on ", device_.str());
  dl.start_epoch(epoch);
  int64_t total = dl.batches_per_epoch();
  if (max_steps >= 0) total = std::min(total, max_steps);
  loader::Batch batch;
  auto next = [&](Tensor& x, Tensor& y, int64_t& b) {
    if (!dl.next(batch)) return false;
    x = batch.x;
    y = batch.y;
    b = batch.size;
    return true;
  };
  return run_epoch(epoch, total, next, [&] { dl.release(batch); });
}

Trainer::Trainer(nn::Module& model, optim::Optimizer& opt, Device device)
    : model_(model), opt_(opt), device_(device) {
  if (precision() == Precision::FP16) {
    scaler_ = std::make_unique<optim::GradScaler>(device);
    opt_.set_scaler(scaler_.get());
  }
  // fp16/bf16: the 16-bit copy of the weights that the layers read, refreshed once per update
  // (one kernel) rather than cast per weight per use. LOUPE_COMPUTE_COPY=0 casts on the fly, for
  // comparison.
  const char* env = std::getenv("LOUPE_COMPUTE_COPY");
  if (compute_dtype() != DType::f32 && device.is_cuda() && !(env && std::string(env) == "0"))
    model_.arena().enable_compute_copy(compute_dtype(), model_.float32_parameters());
}

Trainer::~Trainer() {
  if (scaler_) opt_.set_scaler(nullptr);
}

namespace {
// One output column means a binary classifier (Keras' Dense(1, sigmoid) with binary cross-entropy):
// the sigmoid is fused into the loss, and the int32 labels become 0/1 float targets (cast once a
// step, for the loss and the count). More columns: softmax cross-entropy over the classes.
bool is_binary(const Tensor& logits) { return logits.dim() == 2 && logits.size(1) == 1; }

Tensor targets_for(const Tensor& logits, const Tensor& labels) {
  return is_binary(logits) ? labels.to(logits.dtype()) : labels;
}

Tensor loss_for(const Tensor& logits, const Tensor& targets) {
  return is_binary(logits) ? binary_cross_entropy_with_logits(logits.flatten(0), targets)
                           : cross_entropy(logits, targets);
}

Tensor correct_for(const Tensor& logits, const Tensor& targets) {
  return count_correct(is_binary(logits) ? logits.flatten(0) : logits, targets);
}
}  // namespace

EpochStats Trainer::run_epoch(int epoch, int64_t total, const NextBatch& next_batch, const std::function<void()>& done) {
  EpochStats st;
  st.epoch = epoch;
  model_.train();
  model_.arena().refresh_compute_copy();  // the values may have changed since (a checkpoint)
  instrument::NvtxRange epoch_range("epoch");
  instrument::EpochMonitor* mon = hooks.monitor;
  if (mon) mon->begin_epoch();
  double t0 = now_seconds();
  Tensor loss_sum = zeros(Shape{}, DType::f32, device_), correct = zeros(Shape{}, DType::f32, device_);
  auto [prof_first, prof_last] = hooks.profile_steps;
  // The running loss for the progress bar: an asynchronous copy into pinned memory, polled.
  Tensor peek = hooks.on_step ? empty_pinned(Shape{}, DType::f32) : Tensor();
  void* peek_event = nullptr;
  int64_t peek_samples = 0;
  double peek_time = t0;
  std::optional<double> running_loss;
  while (st.steps < total) {
    if (hooks.stop && hooks.stop->load()) {
      st.interrupted = true;
      break;
    }
    ++global_step_;
    instrument::set_current_step(global_step_);
    if (global_step_ == prof_first) {
      if (device_.is_cuda()) cuda_runtime()->profiler_start();
      if (hooks.on_profile) hooks.on_profile(true);
    }
    int64_t b = 0;
    {
      instrument::NvtxRange step_range("step");
      if (mon) mon->step_begin();
      Tensor x, y;
      bool more;
      {
        instrument::NvtxRange r("data");
        more = next_batch(x, y, b);
      }
      if (!more) {
        --global_step_;
        break;
      }
      if (mon) mon->data_ready();
      if (lr_decay > 0) opt_.set_lr(base_lr / (1.0 + lr_decay * double(opt_.steps())));  // host arithmetic only
      double f0 = instrument::flops_counted();
      Tensor logits, loss;
      {
        instrument::NvtxRange r("forward");
        opt_.zero_grad();
        logits = model_(x);
        if (logits.dtype() != DType::f32) logits = logits.to(DType::f32);  // the loss in float32
        y = targets_for(logits, y);
        loss = loss_for(logits, y);
      }
      {
        instrument::NvtxRange r("backward");
        (scaler_ ? scaler_->scale(loss) : loss).backward();
      }
      {
        instrument::NvtxRange r("optimizer");
        if (scaler_) scaler_->unscale_(model_.arena().grads());
        opt_.step();
        if (scaler_) scaler_->update();
      }
      double step_flops = instrument::flops_counted() - f0;
      NoGradGuard g;
      add_(loss_sum, loss, double(b));  // on the device: no read-back inside the step
      add_(correct, correct_for(logits.detach(), y));
      if (mon) mon->step_issued(step_flops);
      done();
    }
    st.steps++;
    st.samples += b;
    if (global_step_ == prof_last) {
      if (device_.is_cuda()) cuda_runtime()->profiler_stop();
      if (hooks.on_profile) hooks.on_profile(false);
    }
    if (hooks.on_step) {
      double now = now_seconds();
      if (!device_.is_cuda()) {
        if (now - peek_time > 0.2) {  // host memory: a plain read
          running_loss = loss_sum.item() / double(st.samples);
          peek_time = now;
        }
      } else {
        if (peek_event && cuda_runtime()->event_done(peek_event)) {
          running_loss = double(*peek.data<float>()) / double(peek_samples);
          cuda_runtime()->event_destroy(peek_event);
          peek_event = nullptr;
        }
        if (!peek_event && now - peek_time > 0.2) {
          cuda_runtime()->copy_async_on(nullptr, peek.data_ptr(), loss_sum.data_ptr(), sizeof(float),
                                        CopyKind::DeviceToHost);
          peek_event = cuda_runtime()->event_record_on(nullptr);
          peek_samples = st.samples;
          peek_time = now;
        }
      }
      hooks.on_step(st.steps, total, st.samples, running_loss);
    }
  }
  if (peek_event) cuda_runtime()->event_destroy(peek_event);
  instrument::set_current_step(-1);
  // The one read-back of the epoch (it waits for the GPU to finish).
  st.train_loss = loss_sum.item() / double(st.samples);
  st.train_acc = correct.item() / double(st.samples);
  if (scaler_) {  // after the read-back above: no further wait
    std::vector<float> s = scaler_->state().to_vector<float>();
    st.loss_scale = s[optim::kScale];
    st.skipped_steps = int64_t(s[optim::kSkipped]) - skipped_before_;
    skipped_before_ = int64_t(s[optim::kSkipped]);
  }
  st.train_seconds = now_seconds() - t0;
  if (mon) mon->end_train();
  return st;
}

double Trainer::evaluate(const TensorDataset& data, int64_t batch) {
  instrument::NvtxRange range("evaluation");
  NoGradGuard g;
  model_.eval();
  int64_t n = data.size();
  Tensor correct = zeros(Shape{}, DType::f32, device_);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
  Tensor all = from_vector(order, Shape{n}, device_);
  for (int64_t start = 0; start < n; start += batch) {
    Tensor idx = all.slice(0, start, std::min(n, start + batch));
    Tensor x = index_select(data.x, idx, DType::f32, data.x_scale);
    Tensor y = index_select(data.y, idx, DType::i32);
    Tensor logits = model_(x);
    if (logits.dtype() != DType::f32) logits = logits.to(DType::f32);
    add_(correct, correct_for(logits, targets_for(logits, y)));
  }
  model_.train();
  return n ? correct.item() / double(n) : 0.0;
}

}  // namespace loupe::train
