// Which run a record belongs to (docs/profiling.md, "Metrics files"): every record of one process
// carries the same id and start time, so that records of two runs appended to one file can be told
// apart (loupe compare groups by it), and the host's CPU model, so that a figure can be traced to
// its machine.
#pragma once
#include <string>

namespace loupe::instrument {

struct RunStamp {
  std::string run_id;      // 12 hex digits, random per process
  std::string started_at;  // the first call's UTC time, ISO 8601 ("2026-11-26T11:40:32Z")
  std::string cpu_model;   // /proc/cpuinfo's first "model name" ("" where there is none)
};

// This process's stamp, made on the first call.
const RunStamp& run_stamp();

// The CPU model in a /proc/cpuinfo text ("" when none is named). For tests.
std::string cpu_model_in(const std::string& cpuinfo);

}  // namespace loupe::instrument
