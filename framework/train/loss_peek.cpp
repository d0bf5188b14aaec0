#include "train/loss_peek.h"

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "train/trainer.h"

namespace loupe::train {

LossPeek::LossPeek(Device device, const Tensor& loss_sum, Tensor buffer)
    : device_(device), sum_(loss_sum), peek_(std::move(buffer)), time_(now_s()) {
  LOUPE_CHECK(!device.is_cuda() || peek_.defined(), "the loss peek needs the trainer's pinned buffer");
}

void LossPeek::after_step(int64_t samples, int64_t step) {
  const double now = now_s();
  if (!device_.is_cuda()) {
    if (now - time_ > 0.2) {
      loss_ = sum_.item() / double(samples);
      step_ = step;
      time_ = now;
    }
    return;
  }
  if (event_ && cuda_runtime()->event_done(event_)) {
    loss_ = double(*peek_.data<float>()) / double(samples_);
    cuda_runtime()->event_destroy(event_);
    event_ = nullptr;
  }
  if (!event_ && now - time_ > 0.2) {
    cuda_runtime()->copy_async_on(nullptr, peek_.data_ptr(), sum_.data_ptr(), sizeof(float), CopyKind::DeviceToHost);
    event_ = cuda_runtime()->event_record_on(nullptr);
    samples_ = samples;
    step_ = step;
    time_ = now;
  }
}

void LossPeek::end() {
  if (event_) cuda_runtime()->event_destroy(event_);
  event_ = nullptr;
}

}  // namespace loupe::train
