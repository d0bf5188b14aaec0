// Chrome trace / Perfetto JSON writer: complete events ("ph":"X") that chrome://tracing and
// ui.perfetto.dev open directly, e.g. host phases on one track and CUPTI's GPU records on others.
#pragma once
#include <string>
#include <vector>

namespace loupe::instrument {

struct TraceEvent {
  std::string name, category;
  double ts_us, dur_us;   // start and duration in microseconds (any common origin)
  int pid, tid;           // track: process and thread ids as the viewer groups them
  std::string args_json;  // "" or the text of a JSON object, written as "args" verbatim
};

// Writes {"traceEvents":[{"ph":"X",...},...],"displayTimeUnit":"ms"}. Names and categories are
// JSON-escaped. Throws loupe::Error naming the path when it cannot be written, and naming the
// event when a time is not finite or args_json is not an object.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

// JSON string literal (with the quotes) for s; exposed for the other JSON writers and the tests.
std::string json_quote(const std::string& s);

}  // namespace loupe::instrument
