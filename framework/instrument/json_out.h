// JSON written through nlohmann-json (Debian's nlohmann-json3-dev): the records, the profile and
// the traces. An internal header of the library's .cpp files (it includes nlohmann's).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace loupe::instrument {

// A figure as JSON: null where it is not finite (JSON has no NaN or infinity), an integer where it
// is whole (a count reads 14, not 14.0), else the shortest decimal that reads back as the same double.
inline nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) return int64_t(v);  // 2^53: exact
  return v;
}

// One line of JSON. Invalid UTF-8 in a string (a model name read from a file) becomes U+FFFD rather
// than an exception.
inline std::string json_text(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace loupe::instrument
