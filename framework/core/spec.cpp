#include "core/spec.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/text.h"

namespace loupe {

OptionSpec::OptionSpec(std::string option, std::string spec, std::string example, std::string first_key)
    : option_(std::move(option)), spec_(std::move(spec)), example_(std::move(example)) {
  std::string rest = spec_;
  if (first_key.empty()) {
    const size_t colon = spec_.find(':');
    kind_ = spec_.substr(0, colon);
    rest = colon == std::string::npos ? "" : spec_.substr(colon + 1);
    if (colon == std::string::npos) return;
  }
  bool first = true;
  for (size_t a = 0; a <= rest.size(); first = false) {
    size_t b = rest.find(',', a);
    if (b == std::string::npos) b = rest.size();
    const std::string item = rest.substr(a, b - a);
    a = b + 1;
    const size_t eq = item.find('=');
    if (first && !first_key.empty() && eq == std::string::npos) keys_[first_key] = item;
    else if (!item.empty()) keys_[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
  }
}

void OptionSpec::bad(const std::string& why) const {
  throw Error(option_ + " '" + spec_ + "': " + why + " (e.g. " + option_ + " " + example_ + ")");
}

double OptionSpec::decimal(const std::string& key, const std::string& text) const {
  const bool ok = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  const double v = ok ? std::strtod(text.c_str(), &end) : NAN;
  if (!ok || end != text.c_str() + text.size() || !std::isfinite(v)) bad(key + " must be a number, got '" + text + "'");
  return v;
}

double OptionSpec::number(const std::string& key, double lo, double hi, bool lo_in, const double* fallback) {
  const std::optional<std::string> t = text(key);
  if (!t) {
    if (!fallback) bad("it needs " + key);
    return *fallback;
  }
  const double v = decimal(key, *t);
  if (v < lo || (v == lo && !lo_in) || v > hi)
    bad(key + " " + *t + " is out of range (" + (lo_in ? "from " : "above ") + fmt("%g", lo) + " up to " + fmt("%g", hi) +
        ")");
  return v;
}

int64_t OptionSpec::whole(const std::string& key, double lo, const double* fallback) {
  const double v = number(key, lo, 1e12, true, fallback);
  if (v != std::floor(v)) bad(key + " must be a whole number");
  return int64_t(v);
}

std::vector<double> OptionSpec::numbers(const std::string& key) {
  const std::optional<std::string> t = text(key);
  if (!t) bad("it needs " + key);
  std::vector<double> out;
  for (size_t a = 0; a <= t->size();) {
    size_t b = t->find('/', a);
    if (b == std::string::npos) b = t->size();
    out.push_back(decimal(key, t->substr(a, b - a)));
    a = b + 1;
  }
  return out;
}

std::optional<std::string> OptionSpec::text(const std::string& key) {
  const auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  std::string t = it->second;
  keys_.erase(it);
  return t;
}

void OptionSpec::done(const std::string& known) const {
  if (!keys_.empty()) bad("it has no key '" + keys_.begin()->first + "'" + (known.empty() ? "" : " (" + known + ")"));
}

}  // namespace loupe
