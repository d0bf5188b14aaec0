#include "instrument/chrome_trace.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/file_check.h"
#include "instrument/json_out.h"

namespace loupe::instrument {

std::string json_quote(const std::string& s) { return json_text(s); }

namespace {
// Microseconds to the nanosecond: what the viewers resolve.
nlohmann::ordered_json us_json(double us) { return json_number(std::round(us * 1e3) / 1e3); }
}  // namespace

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  // Check everything before touching the file, so that a bad event leaves no half-written trace.
  for (const TraceEvent& e : events) {
    LOUPE_CHECK(std::isfinite(e.ts_us) && std::isfinite(e.dur_us), "Chrome trace '", path, "': event ",
                json_quote(e.name), " has a non-finite time (ts ", e.ts_us, ", dur ", e.dur_us, ")");
    LOUPE_CHECK(e.args_json.empty() || nlohmann::json::accept(e.args_json), "Chrome trace '", path, "': event ",
                json_quote(e.name), " has args that are not JSON: ", e.args_json);
    LOUPE_CHECK(e.args_json.empty() || nlohmann::json::parse(e.args_json).is_object(), "Chrome trace '", path,
                "': event ", json_quote(e.name), " has args that are not a JSON object: ", e.args_json);
  }
  require_regular_output(path, "trace file");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  // One sentence, no source location: a missing directory or a full disk is the user's to fix.
  if (!f) throw Error("cannot write the Chrome trace '" + path + "': " + std::strerror(errno));
  // One event a line (a trace of many thousands stays readable and diffable), each through nlohmann.
  f << "{\"traceEvents\":[";
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    nlohmann::ordered_json j{{"ph", "X"},           {"name", e.name}, {"cat", e.category},
                             {"ts", us_json(e.ts_us)}, {"dur", us_json(e.dur_us)}, {"pid", e.pid}, {"tid", e.tid}};
    if (!e.args_json.empty()) j["args"] = nlohmann::ordered_json::parse(e.args_json);
    f << (i ? ",\n" : "\n") << json_text(j);
  }
  f << "\n],\"displayTimeUnit\":\"ms\"}\n";
  f.close();
  if (!f) throw Error("cannot write the Chrome trace '" + path + "': " + std::strerror(errno));
}

}  // namespace loupe::instrument
