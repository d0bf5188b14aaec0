// Numbers on the command line: every numeric option of `loupe` goes through these two parsers.
// The whole text must be the number (no sign-less junk after it, no leading spaces), and it must
// lie in the option's range, or the option is refused with one sentence that names the range:
//   --epochs must be an integer from 1 to 1000000, got '4294967297'
//   --lr must be a finite number above 0 and at most 1000, got 'inf'
// (strtoll/strtod alone accepted "5x" as 5 only with a check after them, clamped out-of-range
// values, and an int(...) narrowing afterwards turned 4294967297 into 1; strtod read "0x10" as 16.)
#pragma once
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace loupe::cli {

// A bad value as a message echoes it: its first 40 characters, "..." for the rest.
inline std::string shown_value(const std::string& text) {
  return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

// Whether `text` is a decimal number as people write one: an optional "-", digits with at most one
// ".", at least one digit, an optional exponent (e or E, a sign, digits). strtod alone also takes
// hexadecimal ("0x10" is 16), "inf", "nan" and leading spaces.
inline bool is_decimal(const std::string& text) {
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0, digits = 0;
  auto digit = [&](size_t k) { return k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])); };
  for (; digit(i); ++i) ++digits;
  if (i < text.size() && text[i] == '.')
    for (++i; digit(i); ++i) ++digits;
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == text.size();
}

// An integer in [lo, hi], written in decimal ("-" allowed where lo < 0, no "+").
inline int64_t parse_int(const std::string& text, const std::string& flag, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi)
    throw Error(flag + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" +
                shown_value(text) + "'");
  return v;
}

// A finite number above lo (or from lo, with lo_inclusive) and at most hi.
inline double parse_double(const std::string& text, const std::string& flag, double lo, double hi,
                           bool lo_inclusive = false) {
  auto num = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  char* end = nullptr;
  errno = 0;
  double v = is_decimal(text) ? std::strtod(text.c_str(), &end) : NAN;
  bool ok = end && *end == '\0' && errno == 0 && std::isfinite(v) && (lo_inclusive ? v >= lo : v > lo) && v <= hi;
  if (!ok)
    throw Error(flag + " must be a finite number " + (lo_inclusive ? "from " : "above ") + num(lo) + " " +
                (lo_inclusive ? "to " : "and at most ") + num(hi) + ", got '" + shown_value(text) + "'");
  return v;
}

// "fp32,tf32" -> {"fp32", "tf32"}; empty items are dropped.
inline std::vector<std::string> parse_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "32,128,512" -> {32, 128, 512}, each an integer in [lo, hi]. Errors name the bad item.
inline std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (const std::string& item : parse_list(s)) out.push_back(parse_int(item, flag, lo, hi));
  if (out.empty()) throw Error(flag + " needs a comma-separated list, e.g. 32,128,512");
  return out;
}

}  // namespace loupe::cli
