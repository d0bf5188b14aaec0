// Text from a character model (`loupe generate`; char_lstm, as the Keras example samples it): the
// last 40 characters in, the next one drawn from the softmax sharpened by the temperature
// (p_i ~ p_i^(1/T)), appended, repeated.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/char_corpus.h"
#include "models/session.h"
#include "run/run.h"

namespace loupe::run {

struct GenerateConfig {
  RunConfig run;                      // model, data (the corpus), device, trainer's precision
  std::string checkpoint;             // the trained weights
  std::optional<std::string> prompt;  // unset: a random window of 40 characters of the corpus
  double temperature = 0.5;
  uint64_t seed = 1;
};

class Generator {
 public:
  // Loads the characters (with a prompt and a checkpoint that stores its table, the table alone:
  // no corpus is read) and the weights; refuses a checkpoint trained on other characters.
  explicit Generator(const GenerateConfig& c);
  ~Generator();
  const std::string& prompt() const { return prompt_; }
  size_t prompt_characters() const { return prompt_len_; }
  // A checkpoint whose characters could not be checked: what to say ("" when they were).
  std::string unchecked_vocabulary() const { return session_->unchecked_vocabulary(); }
  // The next character, as text.
  std::string next();

 private:
  GenerateConfig c_;
  std::shared_ptr<const data::CharCorpus> corpus_;
  std::unique_ptr<models::Session> session_;
  std::vector<int32_t> text_;
  std::string prompt_;
  size_t prompt_len_ = 0;
  int64_t drawn_ = 0;
};

}  // namespace loupe::run
