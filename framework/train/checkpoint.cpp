#include "train/checkpoint.h"

#include <cstring>

#include "autograd/node.h"
#include "core/error.h"

namespace loupe::train {

namespace {
CheckpointRecord to_record(const std::string& name, const Tensor& t) {
  CheckpointRecord r;
  r.name = name;
  r.dtype = int32_t(t.dtype());
  r.shape = t.shape().vec();
  Tensor h = t.to(kCPU).contiguous();
  r.bytes.resize(h.nbytes());
  if (!r.bytes.empty()) std::memcpy(r.bytes.data(), h.data_ptr(), r.bytes.size());
  return r;
}

void from_record(const std::string& path, const CheckpointFile& f, const std::string& name, const Tensor& dst) {
  const CheckpointRecord* r = f.find(name);
  if (!r) throw Error("checkpoint '" + path + "' has no tensor '" + name + "'; was it written for another model?");
  if (Shape(r->shape) != dst.shape() || r->dtype != int32_t(dst.dtype()))
    throw Error("checkpoint '" + path + "': tensor '" + name + "' is " + Shape(r->shape).str() + " in the file but " +
                dst.shape().str() + " in the model");
  Tensor h = empty(dst.shape(), dst.dtype(), kCPU);
  if (h.nbytes()) std::memcpy(h.data_ptr(), r->bytes.data(), h.nbytes());
  copy_(dst, h);
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const CheckpointMeta& meta) {
  CheckpointFile f;
  f.model = meta.model;
  f.meta = {{"epoch", std::to_string(meta.epoch)},
            {"seed", std::to_string(meta.seed)},
            {"rng_offset", std::to_string(meta.rng_offset)}};
  for (const auto& [name, t] : model.named_parameters()) f.records.push_back(to_record("model/" + name, t));
  for (const auto& [name, t] : model.named_buffers()) f.records.push_back(to_record("buffer/" + name, t));
  if (opt) {
    f.meta.push_back({"optimizer", opt->name()});
    f.meta.push_back({"optimizer_steps", std::to_string(opt->steps())});
    f.meta.push_back({"lr", std::to_string(opt->lr())});
    for (const auto& [name, t] : opt->state()) f.records.push_back(to_record("optim/" + name, t));
  }
  write_checkpoint_file(path, f);
}

CheckpointMeta load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* opt,
                               const std::string& expected_model) {
  CheckpointFile f = read_checkpoint_file(path);
  if (!expected_model.empty() && f.model != expected_model)
    throw Error("checkpoint '" + path + "' holds model '" + f.model + "', not '" + expected_model + "'");
  NoGradGuard g;
  for (const auto& [name, t] : model.named_parameters()) from_record(path, f, "model/" + name, t);
  for (const auto& [name, t] : model.named_buffers()) from_record(path, f, "buffer/" + name, t);
  if (opt) {
    std::string saved = f.meta_value("optimizer");
    if (saved != opt->name())
      throw Error("checkpoint '" + path + "' was trained with optimizer '" + saved + "', not " + opt->name());
    for (const auto& [name, t] : opt->state()) from_record(path, f, "optim/" + name, t);
    opt->set_steps(std::stoll(f.meta_value("optimizer_steps", "0")));
  }
  CheckpointMeta m;
  m.model = f.model;
  m.epoch = std::stoi(f.meta_value("epoch", "0"));
  m.seed = std::stoull(f.meta_value("seed", "0"));
  m.rng_offset = std::stoull(f.meta_value("rng_offset", "0"));
  return m;
}

}  // namespace loupe::train
