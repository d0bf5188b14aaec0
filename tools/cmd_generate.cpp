// loupe generate: char_lstm's sampling loop, as the Keras example: the last 40 characters in, the
// next one drawn from the softmax sharpened by the temperature (p_i ~ p_i^(1/T)), appended, repeated.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "core/philox.h"
#include "models/session.h"
#include "ops/view.h"
#include "tools/commands.h"

namespace loupe::tools {

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
}  // namespace

int cmd_generate(const Options& o) {
  if (o.model != "char_lstm") throw Error("loupe generate works with char_lstm (a character model), got '" + o.model + "'");
  if (o.checkpoint.empty()) throw Error("loupe generate needs --checkpoint PATH (written by loupe train char_lstm --save PATH)");
  const models::ModelInfo& info = models::find_model(o.model);
  Device dev = pick_device(o);
  if (std::string why = precision_unsupported(o.precision, dev); !why.empty()) throw Error(why);
  PrecisionScope precision_scope(o.precision);
  Data data = load_data(data_request(o, info, false, true), dev);  // the corpus gives the characters
  models::SessionOptions so;
  so.device = dev;
  so.vocab = data.vocab;
  models::Session session(info, so);
  session.load_weights(o.checkpoint);
  session.model().eval();
  const data::CharCorpus& corpus = *data.corpus;
  std::vector<int32_t> text = start_text(o, corpus);
  size_t prompt_len = text.size();
  NoGradGuard g;
  for (int64_t i = 0; i < o.length; ++i) text.push_back(next_char(session.model(), text, dev, o.temperature, o.seed, i));
  std::string prompt = corpus.decode(std::vector<int32_t>(text.begin(), text.begin() + long(prompt_len)));
  std::string out = corpus.decode(std::vector<int32_t>(text.begin() + long(prompt_len), text.end()));
  std::printf("prompt (%zu characters): %s\n---\n%s%s\n", prompt_len, prompt.c_str(), prompt.c_str(), out.c_str());
  return 0;
}

}  // namespace loupe::tools
