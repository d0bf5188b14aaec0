#include "models/session.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "models/memory.h"

namespace loupe::models {

namespace {
// UTF-8 split into characters by lead byte, never throwing: a table read from a file may be corrupt.
std::vector<std::string> split_chars(const std::string& utf8) {
  std::vector<std::string> out;
  for (unsigned char c : utf8) {
    if ((c & 0xC0) == 0x80 && !out.empty()) out.back() += char(c);
    else out.emplace_back(1, char(c));
  }
  return out;
}

std::string escape_char(const std::string& c) {
  if (c == "\n") return "\\n";
  if (c == "\t") return "\\t";
  if (c == "\r") return "\\r";
  if (c.size() == 1 && (unsigned char)(c[0]) < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c[0]));
    return buf;
  }
  return c;
}

// The characters of `of` that `in` lacks, quoted: "'x', 'y'" (the first 8, then "...").
std::string missing_from(const std::vector<std::string>& of, const std::vector<std::string>& in) {
  std::string out;
  int n = 0;
  for (const std::string& c : of) {
    if (std::find(in.begin(), in.end(), c) != in.end()) continue;
    if (n++ == 8) return out + ", ...";
    out += (out.empty() ? "'" : ", '") + escape_char(c) + "'";
  }
  return out;
}
}  // namespace

std::string preview_chars(const std::string& utf8, size_t max) {
  std::vector<std::string> cs = split_chars(utf8);
  std::string out;
  for (size_t i = 0; i < cs.size() && i < max; ++i) out += escape_char(cs[i]);
  return cs.size() > max ? out + "..." : out;
}

std::string vocabulary_mismatch(const std::string& path, const train::CheckpointMeta& saved, const std::string& chars,
                                const std::string& words) {
  if (!chars.empty() && !saved.chars.empty() && chars != saved.chars) {
    const std::vector<std::string> a = split_chars(saved.chars), b = split_chars(chars);
    const std::string added = missing_from(b, a), lacked = missing_from(a, b);
    std::string diff = added.empty() && lacked.empty() ? "the same characters in another order"
                       : added.empty()                 ? "it lacks " + lacked
                       : lacked.empty()                ? "it adds " + added
                                                       : "it adds " + added + " and lacks " + lacked;
    return "checkpoint '" + path + "' was trained on a text of " + std::to_string(a.size()) + " characters ('" +
           preview_chars(saved.chars) + "'), this corpus has " + std::to_string(b.size()) + " ('" +
           preview_chars(chars) + "'): " + diff + ", so its character ids would mean other characters; " +
           "give the text it was trained on (--data PATH)";
  }
  if (!words.empty() && !saved.words.empty() && words != saved.words)
    return "checkpoint '" + path + "' was trained with a vocabulary of " + saved.words + ", this data set's is " + words +
           ", so its word ids would mean other words; give the reviews it was trained on (--data DIR)";
  return "";
}

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
  if (!info.loss_missing.empty()) throw Error(info.loss_missing);
  options_.trainer.loss = info.recipe.loss;
  options_.trainer.precision = precision_;
  manual_seed(seed_);
  // Before anything is allocated: a model past the machine's memory is refused by its largest layer
  // and the batch, not met by the allocator half-way through the build (models/memory.h).
  check_memory(info, options_.batch > 0 ? options_.batch : info.recipe.batch, precision_, options_.device);
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

void Session::check_vocabulary(const std::string& path, const train::CheckpointMeta& m) {
  if (std::string why = vocabulary_mismatch(path, m, options_.chars, options_.words); !why.empty()) throw Error(why);
  unchecked_.clear();
  if (!options_.chars.empty() && m.chars.empty())
    unchecked_ = "checkpoint '" + path + "' stores no character table (it was written before loupe stored one): " +
                 "whether it was trained on a text of these characters could not be checked";
  else if (!options_.words.empty() && m.words.empty())
    unchecked_ = "checkpoint '" + path + "' stores no vocabulary (it was written before loupe stored one): " +
                 "whether it was trained with these word ids could not be checked";
}

// A model file's checkpoint is tied to its architecture (ModelInfo::identity); one written when a
// model file was named by its path says so, rather than "holds model 'mlp.json'".
void Session::check_model(const std::string& path, const train::CheckpointMeta& m) const {
  const std::string& want = info_.checkpoint_name();
  if (m.model == want) return;
  if (!info_.identity.empty() && m.model.size() > 5 && m.model.compare(m.model.size() - 5, 5, ".json") == 0)
    throw Error("checkpoint '" + path + "' names its model file by path ('" + m.model + "'), as loupe did before it "
                "named a model file by its architecture (" + want + "): train it again with this loupe to resume it");
  throw Error("checkpoint '" + path + "' holds model '" + m.model + "', not '" + want + "'" +
              (info_.identity.empty() ? "" : " (a model file's architecture: a layer, its size or its name differs)"));
}

train::CheckpointMeta Session::resume(const std::string& path) {
  train::CheckpointMeta m = train::load_checkpoint(path, *model_, &optimizer(), "", [&](const train::CheckpointMeta& meta) {
    check_model(path, meta);
    check_vocabulary(path, meta);
  });
  resumed_epochs_ = m.epoch;
  seed_ = m.seed;
  default_generator().seed = m.seed;
  default_generator().offset = m.rng_offset;
  return m;
}

train::CheckpointMeta Session::load_weights(const std::string& path) {
  return train::load_checkpoint(path, *model_, nullptr, "", [&](const train::CheckpointMeta& meta) {
    check_model(path, meta);
    check_vocabulary(path, meta);
  });
}

void Session::save(const std::string& path, int epochs_completed) {
  train::save_checkpoint(path, *model_, &optimizer(),
                         {info_.checkpoint_name(), epochs_completed, seed_, default_generator().offset, options_.chars, options_.words});
}

void Session::continue_global_step(int64_t steps_per_epoch) {
  if (resumed_epochs_ > 0) trainer().set_global_step(int64_t(resumed_epochs_) * steps_per_epoch);
}

}  // namespace loupe::models
