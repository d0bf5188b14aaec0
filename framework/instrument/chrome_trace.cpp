#include "instrument/chrome_trace.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/file_check.h"

namespace loupe::instrument {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += char(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

namespace {
// Fixed notation with ns resolution; locale-independent, unlike printf.
std::string number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 3);
  return std::string(buf, r.ptr);
}
}  // namespace

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  // Check everything before touching the file, so that a bad event leaves no half-written trace.
  for (const TraceEvent& e : events) {
    LOUPE_CHECK(std::isfinite(e.ts_us) && std::isfinite(e.dur_us), "Chrome trace '", path, "': event ",
                json_quote(e.name), " has a non-finite time (ts ", e.ts_us, ", dur ", e.dur_us, ")");
    LOUPE_CHECK(e.args_json.empty() || (e.args_json.front() == '{' && e.args_json.back() == '}'),
                "Chrome trace '", path, "': event ", json_quote(e.name),
                " has args that are not a JSON object: ", e.args_json);
  }
  require_regular_output(path, "trace file");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  // One sentence, no source location: a missing directory or a full disk is the user's to fix.
  if (!f) throw Error("cannot write the Chrome trace '" + path + "': " + std::strerror(errno));
  f << "{\"traceEvents\":[";
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    f << (i ? ",\n" : "\n") << "{\"ph\":\"X\",\"name\":" << json_quote(e.name)
      << ",\"cat\":" << json_quote(e.category) << ",\"ts\":" << number(e.ts_us)
      << ",\"dur\":" << number(e.dur_us) << ",\"pid\":" << e.pid << ",\"tid\":" << e.tid;
    if (!e.args_json.empty()) f << ",\"args\":" << e.args_json;
    f << "}";
  }
  f << "\n],\"displayTimeUnit\":\"ms\"}\n";
  f.close();
  if (!f) throw Error("cannot write the Chrome trace '" + path + "': " + std::strerror(errno));
}

}  // namespace loupe::instrument
