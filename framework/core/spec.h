// An option's spec (docs/cli.md, "Training controls"): `KIND:key=value,key,...` (--lr-schedule) or
// `value,key=value,...` (--early-stop, whose first bare value is `first_key`'s). Its keys are taken
// one at a time, each checked, and a refusal is one sentence naming the option, the spec and an
// example: --lr-schedule 'cosine:x=1': it has no key 'x' (e.g. --lr-schedule cosine:decay_steps=1000).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loupe {

class OptionSpec {
 public:
  // example: what follows the option in the refusal's "e.g."; first_key "" for the KIND: form.
  OptionSpec(std::string option, std::string spec, std::string example, std::string first_key = "");
  // The KIND before the colon ("" in the value-first form).
  const std::string& kind() const { return kind_; }
  void set_example(std::string example) { example_ = std::move(example); }
  [[noreturn]] void bad(const std::string& why) const;
  bool has(const std::string& key) const { return keys_.count(key) > 0; }
  // A decimal number (no hexadecimal, inf or nan) in (lo, hi], or [lo, hi] with lo_in; required
  // unless a fallback is given.
  double number(const std::string& key, double lo, double hi, bool lo_in, const double* fallback = nullptr);
  // A whole number from lo.
  int64_t whole(const std::string& key, double lo, const double* fallback = nullptr);
  // a/b/c, each a decimal number; required.
  std::vector<double> numbers(const std::string& key);
  // Whether the key was there (a bare key: a flag such as staircase).
  bool flag(const std::string& key) { return keys_.erase(key) > 0; }
  // The key's text, taken; nothing when absent.
  std::optional<std::string> text(const std::string& key);
  // Refuses a key nothing took, naming the keys there are when `known` is given.
  void done(const std::string& known = "") const;

 private:
  double decimal(const std::string& key, const std::string& text) const;
  std::string option_, spec_, example_, kind_;
  std::map<std::string, std::string> keys_;
};

}  // namespace loupe
