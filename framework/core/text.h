// Text that the library's writers share (the report, its CSV, the op profile, the divergence
// message): one number through printf, a CSV cell, a list joined.
#pragma once
#include <cstdarg>
#include <string>
#include <vector>

namespace loupe {

// printf's text of one number through the format `f` ("%.1f%%"); at most 63 characters.
std::string fmt(const char* f, double v);

// printf's text of any arguments, however long (the tables and reports the library prints).
std::string printed(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string vprinted(const char* format, va_list args);

// RFC 4180: a cell holding a separator, quote or line break is quoted, the quotes inside doubled.
std::string csv_cell(const std::string& s);

// The strings with `sep` between each two.
std::string join(const std::vector<std::string>& v, const char* sep);

}  // namespace loupe
