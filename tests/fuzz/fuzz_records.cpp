// loupe compare's reader of run records (cli/compare.cpp read_run on cli/flat_json.cpp, which
// parses each line with nlohmann-json): the bytes as a JSONL file. An accepted file's records each
// hold the four fields read_run requires; then the records are summarised as `loupe compare` does.
#include <string>
#include <vector>

#include "instrument/compare.h"
#include "core/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file(".jsonl");
  try {
    const std::vector<loupe::instrument::FlatRecord> rs = loupe::instrument::read_run(file.write(data, size));
    for (const auto& r : rs)
      for (const char* key : {"model", "batch", "precision", "samples_per_sec"})
        if (!r.count(key)) __builtin_trap();
    // As `loupe compare RUN RUN`: the run against itself, every section formatted.
    const std::vector<loupe::instrument::RunSummary> s = loupe::instrument::summarize_run(rs, "a", 2.5);
    std::string warning;
    for (const auto& section : loupe::instrument::compare_sections({s, s}, &warning)) {
      (void)loupe::instrument::format_section(section);
      (void)loupe::instrument::compare_csv_rows(section);
    }
    loupe::fuzz::accepted("records");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  return 0;
}
