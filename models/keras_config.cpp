// The checked reading of a Keras config's values (models/keras_layers.h): each value refused by
// its key and a short prefix of what the file has (docs/reliability.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "models/keras_layers.h"

namespace loupe::models::keras {

// ---- checked values --------------------------------------------------------------------------

std::string layer_label(const Layer& l) { return "layer '" + cut(l.name) + "' (" + cut(l.cls) + ")"; }

std::string cut(const std::string& s, size_t prefix) {
  if (s.size() <= prefix) return s;
  size_t n = prefix;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return s.substr(0, n) + "...";
}

std::string shown(const json& v) { return cut(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + (s[i] == kFreeLength ? "None" : std::to_string(s[i]));
  return t + "]";
}

void Config::fail(const std::string& why) const { throw Error(where + " " + why); }

bool Config::flag(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!c.at(key).is_boolean()) fail("has " + std::string(key) + " " + shown(c.at(key)) + "; loupe takes true or false");
  return c.at(key).get<bool>();
}

std::string Config::text(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!c.at(key).is_string()) fail("has " + std::string(key) + " " + shown(c.at(key)) + "; loupe takes a name");
  return c.at(key).get<std::string>();
}

namespace {
std::string bound(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}
}  // namespace

// Checked as the command line's numbers are (cli/options.cpp): a NaN or an infinity is outside
// every range.
double Config::real(const char* key, double fallback, Range r) const {
  if (!has(key)) return fallback;
  const json& v = c.at(key);
  const double x = v.is_number() ? v.get<double>() : std::nan("");
  const bool ok = std::isfinite(x) && (r.lo_in ? x >= r.lo : x > r.lo) && (r.hi_in ? x <= r.hi : x < r.hi);
  if (ok) return x;
  std::string range = std::isfinite(r.lo) ? std::string(r.lo_in ? " from " : " above ") + bound(r.lo) : "";
  if (std::isfinite(r.hi)) range += (r.hi_in ? " up to " : " to below ") + bound(r.hi);
  fail("has " + std::string(key) + " " + shown(v) + "; loupe takes a " + (range.empty() ? "finite number" : "number" + range));
}

const json& config_of(const json& v) {
  static const json none = json::object();
  return v.is_object() && v.contains("config") && v.at("config").is_object() ? v.at("config") : none;
}

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}
}  // namespace

// A Keras class's name as one key, from a string or a serialized object: "glorot_uniform",
// "GlorotUniform" and {"class_name": "GlorotUniform", ...} are all "glorotuniform" (initializers,
// optimizers, losses). Keras 2.2 wrote Glorot's uniform as VarianceScaling(1, fan_avg, uniform).
std::string class_key(const json& v) {
  auto string_at = [](const json& o, const char* key) {  // "" where absent or not a string: never throws
    return o.is_object() && o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : std::string();
  };
  std::string n = v.is_string() ? v.get<std::string>() : string_at(v, "class_name");
  n = lower(n);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  if (n == "variancescaling" && v.is_object() && v.contains("config")) {
    const json& c = v.at("config");
    const bool unit = c.is_object() && c.contains("scale") && c.at("scale") == 1.0;
    if (unit && string_at(c, "mode") == "fan_avg" && string_at(c, "distribution") == "uniform") return "glorotuniform";
  }
  return n;
}

nn::VarianceScaling keras_initializer(const json& v, const std::string& where, const std::string& key, int64_t fan_in) {
  using D = nn::Distribution;
  using F = nn::FanMode;
  static const std::pair<const char*, nn::VarianceScaling> named[] = {
      {"glorotuniform", {1, F::Average, D::Uniform}}, {"glorotnormal", {1, F::Average, D::TruncatedNormal}},
      {"heuniform", {2, F::In, D::Uniform}},          {"henormal", {2, F::In, D::TruncatedNormal}},
      {"lecununiform", {1, F::In, D::Uniform}},       {"lecunnormal", {1, F::In, D::TruncatedNormal}}};
  const std::string k = class_key(v);
  for (const auto& [name, vs] : named)
    if (k == name) return vs;
  const json& vc = config_of(v);
  const Config kc{vc, where + "'s " + key + " (" + cut(k) + ")"};
  const double n = double(std::max<int64_t>(fan_in, 1));
  // RandomNormal and RandomUniform about 0 are VarianceScaling's over the fan in, their variance
  // scale / fan_in: stddev^2 and limit^2 / 3.
  if (k == "randomnormal") {
    if (kc.real("mean", 0, Range{-1e30, true, 1e30, true}) != 0) kc.fail("has a mean other than 0; loupe draws about 0");
    const double sd = kc.real("stddev", 0.05, Range{0, false, 100, true});
    return {sd * sd * n, F::In, D::Normal};
  }
  if (k == "randomuniform") {
    const double lo = kc.real("minval", -0.05, Range{-100, true, 100, true}), hi = kc.real("maxval", 0.05, Range{-100, true, 100, true});
    if (lo != -hi || hi <= 0) kc.fail("is not about 0 (minval -maxval); loupe draws about 0");
    return {hi * hi / 3 * n, F::In, D::Uniform};
  }
  if (k != "variancescaling")
    throw Error(where + " has " + key + " '" + cut(k) + "'; loupe has glorot_uniform, glorot_normal, he_uniform, "
                "he_normal, lecun_uniform, lecun_normal, VarianceScaling, RandomNormal and RandomUniform");
  // Keras takes any positive scale; its own are 1 and 2, and a huge one would overflow float32.
  nn::VarianceScaling vs{kc.real("scale", 1.0, Range{0, false, 1e4, true}), F::In, D::TruncatedNormal};
  const std::string mode = kc.text("mode", "fan_in"), dist = kc.text("distribution", "truncated_normal");
  if (mode != "fan_in" && mode != "fan_out" && mode != "fan_avg") kc.fail("has mode '" + cut(mode) + "'; Keras's are fan_in, fan_out and fan_avg");
  vs.mode = mode == "fan_in" ? F::In : mode == "fan_out" ? F::Out : F::Average;
  // Keras 2.2's "normal" is the truncated one, as its initializers.py draws it.
  if (dist == "untruncated_normal") vs.distribution = D::Normal;
  else if (dist == "uniform") vs.distribution = D::Uniform;
  else if (dist != "normal" && dist != "truncated_normal")
    kc.fail("has distribution '" + cut(dist) + "'; Keras's are truncated_normal (normal), untruncated_normal and uniform");
  return vs;
}

double keras_l2(const json& v, const std::string& where, const std::string& key) {
  const std::string k = class_key(v);
  const json& vc = config_of(v);
  const Config rc{vc, where + "'s " + key + " (" + cut(k) + ")"};
  if ((k != "l2" && k != "l1l2") || rc.real("l1", 0, kFromZero) != 0)
    throw Error(where + " has a " + key + " '" + cut(k) + "'; loupe has l2 (L2, or L1L2 with l1 0)");
  return rc.real("l2", 0.01, kFromZero);
}

// nlohmann's own message without its "[json.exception.type_error.302] " tag.
std::string untagged(const char* what) {
  const std::string w = what;
  const size_t end = w.rfind("] ", w.find(' '));
  return w.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? w.substr(end + 2) : w;
}

bool is_recurrent(const std::string& cls) { return cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN"; }

bool runs_at_any_length(const std::string& cls) {
  for (const char* c : {"InputLayer", "Embedding", "Dropout", "SpatialDropout1D", "Activation", "ReLU", "ELU", "Masking",
                        "LSTM", "GRU", "SimpleRNN", "Bidirectional", "Conv1D", "MaxPooling1D", "AveragePooling1D",
                        "GlobalMaxPooling1D", "GlobalAveragePooling1D"})
    if (cls == c) return true;
  return false;
}

}  // namespace loupe::models::keras
