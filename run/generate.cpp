#include "run/generate.h"

#include <algorithm>
#include <cmath>

#include "autograd/node.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/precision.h"
#include "models/registry.h"
#include "ops/view.h"
#include "train/checkpoint.h"

namespace loupe::run {

namespace {
// The prompt's characters, or a random window of the corpus, as the Keras example starts.
std::vector<int32_t> start_text(const GenerateConfig& c, const data::CharCorpus& corpus) {
  if (c.prompt) {
    std::vector<int32_t> text = corpus.encode(*c.prompt);
    if (text.empty()) throw Error("--prompt is empty");
    return text;
  }
  int64_t k = int64_t(philox(c.seed, 0, 77).v[0] % uint64_t(corpus.num_windows(40, 3)));
  return corpus.window(k, 40, 3);
}

// The next character after the last 40 of `text`, drawn with the i-th random number.
int32_t next_char(nn::Module& model, const std::vector<int32_t>& text, Device dev, double temperature, uint64_t seed,
                  int64_t i) {
  size_t start = text.size() > 40 ? text.size() - 40 : 0;
  std::vector<float> window(text.begin() + long(start), text.end());
  Tensor x = to(from_vector(window, Shape{1, int64_t(window.size())}), dev);
  std::vector<float> logits = model(x).to_vector<float>();
  double mx = *std::max_element(logits.begin(), logits.end()), total = 0;
  std::vector<double> p(logits.size());
  for (size_t c = 0; c < p.size(); ++c) total += p[c] = std::exp((logits[c] - mx) / temperature);
  double u = philox_uniform(seed, uint64_t(i), 78) * total, acc = 0;
  for (size_t c = 0; c < p.size(); ++c)
    if ((acc += p[c]) > u) return int32_t(c);
  return int32_t(p.size() - 1);
}

// The characters the ids mean, and what the model is sized and checked by. With a prompt, no data
// asked for and a checkpoint that stores its table, the table alone (no corpus is read); else the
// corpus, whose table load_weights compares with the checkpoint's.
std::shared_ptr<const data::CharCorpus> characters(const GenerateConfig& c, models::SessionOptions* so) {
  const train::CheckpointMeta saved = train::read_checkpoint_meta(c.checkpoint, c.run.model.checkpoint_name());
  const DataRequest& r = c.run.data;
  if (!c.prompt || !r.dir.empty() || r.synthetic || saved.chars.empty()) {
    Data data = load_data(r, so->device);
    so->vocab = data.vocab;
    so->chars = data.chars;
    return data.corpus;
  }
  const std::string where = "checkpoint '" + c.checkpoint + "': its character table";
  const std::vector<char32_t> table = data::decode_utf8(saved.chars, where);
  auto corpus = std::make_shared<data::CharCorpus>(data::CharCorpus::from_text(saved.chars));
  if (corpus->chars() != table || corpus->vocab_size() > models::kCharLstmMaxChars)
    throw Error(where + " is not up to " + std::to_string(models::kCharLstmMaxChars) +
                " distinct lower-cased characters in order: the file is corrupt");
  so->vocab = corpus->vocab_size();
  so->chars = saved.chars;
  return corpus;
}
}  // namespace

Generator::Generator(const GenerateConfig& c) : c_(c) {
  PrecisionScope precision(c_.run.trainer.precision.value_or(Precision::FP32));
  models::SessionOptions so;
  so.device = c_.run.device;
  so.trainer.precision = c_.run.trainer.precision;
  corpus_ = characters(c_, &so);
  session_ = std::make_unique<models::Session>(c_.run.model, so);
  session_->load_weights(c_.checkpoint);  // refuses a checkpoint trained on other characters
  session_->model().eval();
  text_ = start_text(c_, *corpus_);
  prompt_len_ = text_.size();
  prompt_ = corpus_->decode(text_);
}

Generator::~Generator() = default;

std::string Generator::next() {
  PrecisionScope precision(c_.run.trainer.precision.value_or(Precision::FP32));
  NoGradGuard no_grad;
  text_.push_back(next_char(session_->model(), text_, c_.run.device, c_.temperature, c_.seed, drawn_++));
  return corpus_->decode({text_.back()});
}

}  // namespace loupe::run
