#include "tools/flat_json.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace loupe::tools {
namespace {

struct Parser {
  const std::string& s;
  size_t i = 0;
  std::string err;

  bool fail(const std::string& what) {
    if (err.empty()) err = what + " at character " + std::to_string(i + 1);
    return false;
  }
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) { ++i; return true; }
    return false;
  }

  // A string after its opening quote; \uXXXX below 0x80 kept, others as '?'.
  bool string(std::string& out) {
    for (; i < s.size(); ++i) {
      char c = s[i];
      if (c == '"') { ++i; return true; }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') { out += c; continue; }
      if (++i >= s.size()) break;
      const char* esc = std::strchr("\"\\/bfnrtu", s[i]);
      if (!esc || !s[i]) return fail("bad escape in a string");
      if (s[i] == 'u') {
        if (i + 4 >= s.size()) return fail("short \\u escape");
        for (int k = 1; k <= 4; ++k)
          if (!std::isxdigit(static_cast<unsigned char>(s[i + k]))) return fail("bad \\u escape");
        long cp = std::strtol(s.substr(i + 1, 4).c_str(), nullptr, 16);
        out += cp < 0x80 ? char(cp) : '?';
        i += 4;
        continue;
      }
      static const char kFrom[] = "\"\\/bfnrt", kTo[] = "\"\\/\b\f\n\r\t";
      out += kTo[std::strchr(kFrom, s[i]) - kFrom];
    }
    return fail("unterminated string");
  }

  bool number(double& out) {
    const size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || std::strchr(".eE+-", s[i]))) ++i;
    const std::string text = s.substr(start, i - start);
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);
    if (text.empty() || text == "-" || end != text.c_str() + text.size()) {
      i = start;
      return fail("not a number");
    }
    return true;
  }

  bool word(const char* w) {
    const size_t n = std::strlen(w);
    if (s.compare(i, n, w) != 0) return fail("unexpected text");
    i += n;
    return true;
  }

  bool value(JsonScalar& v, int depth);
  bool nested(char close, int depth);
};

// An array or object after its opening bracket, checked and thrown away.
bool Parser::nested(char close, int depth) {
  if (depth > 64) return fail("nested too deeply");
  if (eat(close)) return true;
  for (;;) {
    JsonScalar ignored;
    if (close == '}') {
      std::string key;
      if (!eat('"') || !string(key)) return fail("expected a key");
      if (!eat(':')) return fail("expected ':' after the key");
    }
    if (!value(ignored, depth + 1)) return false;
    if (eat(close)) return true;
    if (!eat(',')) return fail(std::string("expected ',' or '") + close + "'");
  }
}

bool Parser::value(JsonScalar& v, int depth) {
  ws();
  if (i >= s.size()) return fail("expected a value");
  const char c = s[i];
  if (c == '"') { ++i; v.kind = JsonScalar::Kind::String; return string(v.text); }
  if (c == '[' || c == '{') { ++i; v.kind = JsonScalar::Kind::Skipped; return nested(c == '[' ? ']' : '}', depth); }
  if (c == 'n') { v.kind = JsonScalar::Kind::Null; return word("null"); }
  if (c == 't' || c == 'f') {
    v.kind = JsonScalar::Kind::Bool;
    v.number = c == 't';
    return word(c == 't' ? "true" : "false");
  }
  v.kind = JsonScalar::Kind::Number;
  return number(v.number);
}

}  // namespace

std::optional<FlatRecord> parse_flat_json(const std::string& line, std::string* error) {
  Parser p{line, 0, {}};
  FlatRecord r;
  bool ok = p.eat('{') || p.fail("expected '{' (a JSON object)");
  if (ok && !p.eat('}')) {
    for (;;) {
      std::string key;
      JsonScalar v;
      if (!p.eat('"') || !p.string(key)) { ok = p.fail("expected a key in quotes"); break; }
      if (!p.eat(':')) { ok = p.fail("expected ':' after the key"); break; }
      if (!p.value(v, 0)) { ok = false; break; }
      r[key] = v;
      if (p.eat('}')) break;
      if (!p.eat(',')) { ok = p.fail("expected ',' or '}'"); break; }
    }
  }
  if (ok) {
    p.ws();
    if (p.i != line.size()) ok = p.fail("text after the object");
  }
  if (!ok) {
    if (error) *error = p.err;
    return std::nullopt;
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

}  // namespace loupe::tools
