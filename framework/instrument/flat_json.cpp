// The records' reader on nlohmann-json (Debian's nlohmann-json3-dev), the ecosystem's JSON library:
// the line is parsed whole by it, then its top-level scalars kept. flat_json.h.
#include "instrument/flat_json.h"

#include <nlohmann/json.hpp>

namespace loupe::instrument {

std::optional<FlatRecord> parse_flat_json(const std::string& line, std::string* error) {
  nlohmann::json j;
  // What is inside a nested value (an array or object: "advice") is checked by the parser but not
  // kept, so a hostile line of a million nested brackets costs no more memory than its text.
  const nlohmann::json::parser_callback_t shallow = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    return depth <= 1;
  };
  try {
    // No comments, no trailing commas; a NaN or Infinity literal is not JSON and is refused.
    j = nlohmann::json::parse(line, shallow);
  } catch (const nlohmann::json::parse_error& e) {
    if (error) {
      // "...: syntax error while parsing value - invalid literal; last read: 'tru}'" -> the reason.
      std::string what = e.what();
      const size_t cut = what.find(" - ");
      what = cut == std::string::npos ? what : what.substr(cut + 3);
      *error = what + " at character " + std::to_string(e.byte);
    }
    return std::nullopt;
  } catch (const nlohmann::json::exception& e) {  // a number past double's range (1e999): out_of_range
    if (error) {
      std::string what = e.what();
      const size_t cut = what.find("] ");
      *error = cut == std::string::npos ? what : what.substr(cut + 2);
    }
    return std::nullopt;
  }
  if (!j.is_object()) {
    if (error) *error = std::string("expected an object, got ") + j.type_name() + " at character 1";
    return std::nullopt;
  }
  FlatRecord r;
  for (const auto& [key, v] : j.items()) {
    JsonScalar s;
    if (v.is_null()) {
      s.kind = JsonScalar::Kind::Null;
    } else if (v.is_boolean()) {
      s.kind = JsonScalar::Kind::Bool;
      s.number = v.get<bool>() ? 1 : 0;
    } else if (v.is_number()) {
      s.kind = JsonScalar::Kind::Number;
      s.number = v.get<double>();
    } else if (v.is_string()) {
      s.kind = JsonScalar::Kind::String;
      s.text = v.get<std::string>();
    } else {
      s.kind = JsonScalar::Kind::Skipped;  // an array or an object ("advice")
    }
    r[key] = std::move(s);
  }
  return r;
}

std::optional<double> number_of(const FlatRecord& r, const std::string& key) {
  auto it = r.find(key);
  if (it == r.end() || it->second.kind != JsonScalar::Kind::Number) return std::nullopt;
  return it->second.number;
}

std::string text_of(const FlatRecord& r, const std::string& key) {
  auto it = r.find(key);
  return it == r.end() || it->second.kind != JsonScalar::Kind::String ? "" : it->second.text;
}

}  // namespace loupe::instrument
