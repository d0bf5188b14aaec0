// loupe generate: char_lstm's sampling loop, as the Keras example: the last 40 characters in, the
// next one drawn from the softmax sharpened by the temperature (p_i ~ p_i^(1/T)), appended, repeated.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "core/philox.h"
#include "models/session.h"
#include "ops/view.h"
#include "cli/commands.h"
#include "run/interrupt.h"
#include "train/checkpoint.h"

namespace loupe::cli {

namespace {
// The prompt's characters, or a random window of the corpus, as the Keras example starts.
std::vector<int32_t> start_text(const Options& o, const data::CharCorpus& corpus) {
  if (o.prompt) {
    std::vector<int32_t> text = corpus.encode(*o.prompt);
    if (text.empty()) throw Error("--prompt is empty");
    return text;
  }
  int64_t k = int64_t(philox(o.seed, 0, 77).v[0] % uint64_t(corpus.num_windows(40, 3)));
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

// The characters the ids mean, and what the model is sized and checked by. With --prompt, no
// --data and a checkpoint that stores its table, the table alone (no corpus is read); else the
// corpus, whose table load_weights compares with the checkpoint's.
std::shared_ptr<const data::CharCorpus> characters(const Options& o, models::SessionOptions* so) {
  const train::CheckpointMeta saved =
      train::read_checkpoint_meta(o.checkpoint, models::find_model(o.model).checkpoint_name());
  if (!o.prompt || !o.data.empty() || o.synthetic || saved.chars.empty()) {
    run::Data data = run::load_data(data_request(o, models::find_model(o.model), false, true), so->device);
    so->vocab = data.vocab;
    so->chars = data.chars;
    return data.corpus;
  }
  const std::string where = "checkpoint '" + o.checkpoint + "': its character table";
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

int cmd_generate(const Options& o) {
  if (o.model != "char_lstm") throw Error("loupe generate works with char_lstm (a character model), got '" + o.model + "'");
  if (o.checkpoint.empty()) throw Error("loupe generate needs --checkpoint PATH (written by loupe train char_lstm --save PATH)");
  run::install_interrupt_handlers();  // Ctrl-C ends the text where it got to, which is already printed
  const models::ModelInfo& info = models::find_model(o.model);
  Device dev = pick_device(o);
  if (std::string why = precision_unsupported(o.precision[0], dev); !why.empty()) throw Error(why);
  PrecisionScope precision_scope(o.precision[0]);
  models::SessionOptions so;
  so.device = dev;
  std::shared_ptr<const data::CharCorpus> corpus = characters(o, &so);
  models::Session session(info, so);
  session.load_weights(o.checkpoint);  // refuses a checkpoint trained on other characters
  note_unchecked_vocabulary(session.unchecked_vocabulary());
  session.model().eval();
  std::vector<int32_t> text = start_text(o, *corpus);
  const size_t prompt_len = text.size();
  const std::string prompt = corpus->decode(text);
  std::printf("prompt (%zu characters): %s\n---\n%s", prompt_len, prompt.c_str(), prompt.c_str());
  std::fflush(stdout);
  NoGradGuard g;
  // Each character is printed as it comes, so an interrupted run has given all it made.
  int64_t i = 0;
  for (; i < o.length && !run::interrupt_requested().load(); ++i) {
    text.push_back(next_char(session.model(), text, dev, o.temperature, o.seed, i));
    std::fputs(corpus->decode({text.back()}).c_str(), stdout);
    std::fflush(stdout);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (i < o.length) {
    std::fprintf(stderr, "loupe: interrupted after %lld of %lld characters; the text above is all there is\n",
                 (long long)i, (long long)o.length);
    return run::interrupt_exit_status();
  }
  return 0;
}

}  // namespace loupe::cli
