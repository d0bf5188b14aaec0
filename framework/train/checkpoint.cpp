#include "train/checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/node.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/view.h"

namespace loupe::train {

namespace {
CheckpointRecord to_record(const std::string& name, const Tensor& t) {
  CheckpointRecord r;
  r.name = name;
  r.dtype = int32_t(t.dtype());
  r.shape = t.shape().vec();
  Tensor h = contiguous(to(t, kCPU));
  r.bytes.resize(h.nbytes());
  if (!r.bytes.empty()) std::memcpy(r.bytes.data(), h.data_ptr(), r.bytes.size());
  return r;
}

// NaN and infinite values among the n elements of a floating tensor's bytes (0 for other dtypes).
int64_t count_nonfinite(const uint8_t* p, DType t, int64_t n) {
  int64_t bad = 0;
  auto scan = [&](auto tag, auto is_bad) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, p + i * int64_t(sizeof v), sizeof v);
      bad += is_bad(v);
    }
  };
  switch (t) {
    case DType::f32: scan(float{}, [](float v) { return !std::isfinite(v); }); break;
    case DType::f64: scan(double{}, [](double v) { return !std::isfinite(v); }); break;
    case DType::f16: scan(uint16_t{}, [](uint16_t v) { return (v & 0x7C00) == 0x7C00; }); break;  // exponent all ones
    case DType::bf16: scan(uint16_t{}, [](uint16_t v) { return (v & 0x7F80) == 0x7F80; }); break;
    default: break;
  }
  return bad;
}

// Every field of a record is checked against the tensor it fills before a byte is copied: the
// shape and dtype, then the byte count (a record whose CRC is valid but whose data is shorter
// than its shape says was copied past its end).
void from_record(const std::string& path, const CheckpointFile& f, const std::string& name, const Tensor& dst) {
  const CheckpointRecord* r = f.find(name);
  if (!r) throw Error("checkpoint '" + path + "' has no tensor '" + name + "'; was it written for another model?");
  const std::string where = "checkpoint '" + path + "': tensor '" + name + "'";
  if (r->shape != dst.shape().vec())
    throw Error(where + " is " + dims_text(r->shape) + " in the file but " + dst.shape().str() + " in the model");
  if (r->dtype != int32_t(dst.dtype()))
    throw Error(where + " has dtype code " + std::to_string(r->dtype) + " in the file but " + dtype_name(dst.dtype()) +
                " (code " + std::to_string(int32_t(dst.dtype())) + ") in the model");
  Tensor h = empty(dst.shape(), dst.dtype(), kCPU);
  if (r->bytes.size() != size_t(h.nbytes()))
    throw Error(where + " holds " + std::to_string(r->bytes.size()) + " bytes but its shape and dtype need " +
                std::to_string(h.nbytes()) + ": the file is corrupt");
  // Weights (or optimizer state) that are NaN or infinite come from a run that diverged: they would
  // evaluate at chance or train on as NaN without a word.
  if (const int64_t bad = count_nonfinite(r->bytes.data(), dst.dtype(), dst.numel()))
    throw Error(where + " holds " + std::to_string(bad) + " NaN or infinite values (of " +
                std::to_string(dst.numel()) + "): the run that saved it had diverged; evaluate or resume an " +
                "earlier checkpoint, or train again with a lower --lr");
  if (h.nbytes()) std::memcpy(h.data_ptr(), r->bytes.data(), h.nbytes());
  copy_(dst, h);
}

// A metadata field as an integer in [lo, hi], all of the text a number, or a sentence naming it.
template <class T>
T meta_number(const std::string& path, const CheckpointFile& f, const char* key, T lo, T hi) {
  const std::string v = f.meta_value(key, "0");
  T x{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    throw Error("checkpoint '" + path + "': its '" + key + "' must be an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got '" + v + "'");
  return x;
}

// The metadata's strings: what the vocabulary check reads before any tensor is loaded.
CheckpointMeta meta_strings(const CheckpointFile& f) {
  CheckpointMeta m;
  m.model = f.model;
  m.chars = f.meta_value("chars");
  m.words = f.meta_value("words");
  return m;
}

CheckpointMeta parse_meta(const std::string& path, const CheckpointFile& f, const std::string& expected_model) {
  if (!expected_model.empty() && f.model != expected_model)
    throw Error("checkpoint '" + path + "' holds model '" + f.model + "', not '" + expected_model + "'");
  CheckpointMeta m = meta_strings(f);
  m.epoch = meta_number<int>(path, f, "epoch", 0, kMaxCheckpointEpoch);
  m.seed = meta_number<uint64_t>(path, f, "seed", 0, std::numeric_limits<uint64_t>::max());
  m.rng_offset = meta_number<uint64_t>(path, f, "rng_offset", 0, std::numeric_limits<uint64_t>::max());
  return m;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const CheckpointMeta& meta) {
  CheckpointFile f;
  f.model = meta.model;
  f.meta = {{"epoch", std::to_string(meta.epoch)},
            {"seed", std::to_string(meta.seed)},
            {"rng_offset", std::to_string(meta.rng_offset)}};
  if (!meta.chars.empty()) f.meta.push_back({"chars", meta.chars});
  if (!meta.words.empty()) f.meta.push_back({"words", meta.words});
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
                               const std::string& expected_model,
                               const std::function<void(const CheckpointMeta&)>& check) {
  CheckpointFile f = read_checkpoint_file(path);
  if (!expected_model.empty() && f.model != expected_model)
    throw Error("checkpoint '" + path + "' holds model '" + f.model + "', not '" + expected_model + "'");
  // The strings only: the numbers are checked after the tensors, as they always were (the fuzz
  // corpus's expected outcomes depend on which error comes first).
  if (check) check(meta_strings(f));
  NoGradGuard g;
  for (const auto& [name, t] : model.named_parameters()) from_record(path, f, "model/" + name, t);
  for (const auto& [name, t] : model.named_buffers()) from_record(path, f, "buffer/" + name, t);
  if (opt) {
    std::string saved = f.meta_value("optimizer");
    if (saved != opt->name())
      throw Error("checkpoint '" + path + "' was trained with optimizer '" + saved + "', not " + opt->name());
    for (const auto& [name, t] : opt->state()) from_record(path, f, "optim/" + name, t);
    // Steps are counted in float64 on the device: exact to 2^53.
    opt->set_steps(meta_number<int64_t>(path, f, "optimizer_steps", 0, int64_t(1) << 53));
  }
  return parse_meta(path, f, expected_model);
}

CheckpointMeta read_checkpoint_meta(const std::string& path, const std::string& expected_model) {
  return parse_meta(path, read_checkpoint_file(path), expected_model);
}

}  // namespace loupe::train
