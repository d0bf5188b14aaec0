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
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
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
  std::string range = std::string(r.lo_in ? "from " : "above ") + bound(r.lo);
  if (std::isfinite(r.hi)) range += (r.hi_in ? " up to " : " to below ") + bound(r.hi);
  fail("has " + std::string(key) + " " + shown(v) + "; loupe takes a number " + range);
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

}  // namespace loupe::models::keras
