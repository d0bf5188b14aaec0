#include "models/session.h"

#include <algorithm>
#include <vector>

#include "core/random.h"

namespace loupe::models {

bool wants_channels_last(const nn::Module& model, Precision precision, bool asked) {
  std::vector<Tensor> params = model.parameters();
  const bool has_conv = std::any_of(params.begin(), params.end(), [](const Tensor& p) { return p.dim() == 4; });
  return has_conv && (asked || compute_dtype(precision) != DType::f32);
}

Session::Session(const ModelInfo& info, SessionOptions o)
    : info_(info),
      options_(std::move(o)),
      precision_(options_.trainer.precision.value_or(loupe::precision())),
      lr_(options_.lr > 0 ? options_.lr : info.recipe.lr),
      seed_(options_.seed) {
  options_.trainer.loss = info.recipe.loss;
  options_.trainer.precision = precision_;
  manual_seed(seed_);
  model_ = info.build_for(options_.vocab > 0 && info.vocab > 0 ? options_.vocab : info.vocab);
  model_->to(options_.device);
  channels_last_ = wants_channels_last(*model_, precision_, options_.channels_last);
  if (channels_last_) model_->set_memory_format(MemoryFormat::ChannelsLast);
}

Session::~Session() = default;

optim::Optimizer& Session::optimizer() {
  if (!optimizer_) {
    optimizer_ = make_optimizer(info_.recipe, model_->arena(), lr_);
    optimizer_->set_decay(info_.recipe.decay);
  }
  return *optimizer_;
}

train::Trainer& Session::trainer() {
  if (!trainer_) trainer_ = std::make_unique<train::Trainer>(*model_, optimizer(), options_.device, options_.trainer);
  return *trainer_;
}

train::CheckpointMeta Session::resume(const std::string& path) {
  train::CheckpointMeta m = train::load_checkpoint(path, *model_, &optimizer(), info_.name);
  resumed_epochs_ = m.epoch;
  seed_ = m.seed;
  default_generator().seed = m.seed;
  default_generator().offset = m.rng_offset;
  return m;
}

train::CheckpointMeta Session::load_weights(const std::string& path) {
  return train::load_checkpoint(path, *model_, nullptr, info_.name);
}

void Session::save(const std::string& path, int epochs_completed) {
  train::save_checkpoint(path, *model_, &optimizer(), {info_.name, epochs_completed, seed_, default_generator().offset});
}

void Session::continue_global_step(int64_t steps_per_epoch) {
  if (resumed_epochs_ > 0) trainer().set_global_step(int64_t(resumed_epochs_) * steps_per_epoch);
}

}  // namespace loupe::models
