// loupe::Error and the checks that raise it (docs/design.md principle 6: errors that help).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace loupe {

// Every failure loupe reports is an Error: one message that says what went wrong and, where
// known, what to do about it. The command-line tool prints it and exits non-zero.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
[[noreturn]] void fail(const char* file, int line, const std::string& msg);

template <class... A>
std::string concat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}
}  // namespace detail

}  // namespace loupe

// LOUPE_CHECK(cond, parts...): throws loupe::Error("file:line: parts...") when cond is false.
#define LOUPE_CHECK(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) ::loupe::detail::fail(__FILE__, __LINE__, ::loupe::detail::concat(__VA_ARGS__)); \
  } while (0)

#define LOUPE_FAIL(...) ::loupe::detail::fail(__FILE__, __LINE__, ::loupe::detail::concat(__VA_ARGS__))
