// A reader of flat JSON objects, one per line: what `loupe train --metrics` and `loupe bench --json`
// write (framework/instrument/report_io.cpp). nlohmann-json parses the line; strings, numbers, null,
// true and false are kept, a nested value (array or object, e.g. "advice") is skipped.
#pragma once
#include <map>
#include <optional>
#include <string>

namespace loupe::instrument {

struct JsonScalar {
  enum class Kind { Null, Bool, Number, String, Skipped } kind = Kind::Null;
  double number = 0;  // Number; Bool as 0 or 1
  std::string text;   // String
};

using FlatRecord = std::map<std::string, JsonScalar>;

// The object on `line` (whitespace around it allowed), or nothing with *error saying what is wrong
// and at which character ("expected ':' after the key at character 12").
std::optional<FlatRecord> parse_flat_json(const std::string& line, std::string* error);

// A field's number; nothing when it is absent, null, skipped or not a number.
std::optional<double> number_of(const FlatRecord& r, const std::string& key);
// A field's string ("" when absent or not a string).
std::string text_of(const FlatRecord& r, const std::string& key);

}  // namespace loupe::instrument
