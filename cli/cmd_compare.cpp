// loupe compare: runs side by side from their JSONL (train --metrics, bench --json); the arithmetic
// and the table are cli/compare.cpp's, the bar chart scripts/plot_compare.py's.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "cli/commands.h"
#include "instrument/compare.h"

namespace loupe::cli {

namespace {

// --labels, else each file's name.
std::vector<std::string> run_labels(const Options& o) {
  if (!o.labels.empty() && o.labels.size() != o.files.size())
    throw Error("--labels has " + std::to_string(o.labels.size()) + " names for " + std::to_string(o.files.size()) +
                " runs; give one per run, in the order of the files");
  if (!o.labels.empty()) return o.labels;
  std::vector<std::string> out;
  for (const std::string& f : o.files) out.push_back(std::filesystem::path(f).filename().string());
  return out;
}

void write_compare_csv(const std::vector<instrument::CompareSection>& sections, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error("cannot open '" + path + "' for writing (--csv); check that its directory exists and is writable");
  out << instrument::compare_csv_header() << "\n";
  for (const instrument::CompareSection& s : sections)
    for (const std::string& line : instrument::compare_csv_rows(s)) out << line << "\n";
  out.flush();
  if (!out) throw Error("cannot write '" + path + "' (--csv): " + std::strerror(errno));
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int cmd_compare(const Options& o) {
  if (o.files.size() < 2)
    throw Error("loupe compare needs at least two runs, e.g. `loupe compare a.jsonl b.jsonl` (the JSONL of "
                "loupe train --metrics or loupe bench --json); got " + std::to_string(o.files.size()));
  if (!o.price_per_hour.empty() && o.price_per_hour.size() != o.files.size())
    throw Error("--price-per-hour has " + std::to_string(o.price_per_hour.size()) + " prices for " +
                std::to_string(o.files.size()) + " runs; give one per run, in the order of the files");
  const std::vector<std::string> labels = run_labels(o);
  std::vector<std::vector<instrument::RunSummary>> runs;
  for (size_t i = 0; i < o.files.size(); ++i) {
    std::optional<double> price;
    if (!o.price_per_hour.empty()) price = o.price_per_hour[i];
    runs.push_back(instrument::summarize_run(instrument::read_run(o.files[i]), labels[i], price));
  }
  std::string warning;
  const std::vector<instrument::CompareSection> sections = instrument::compare_sections(runs, &warning);
  if (!warning.empty()) std::fprintf(stderr, "loupe compare: warning: %s\n", warning.c_str());
  for (size_t i = 0; i < sections.size(); ++i) std::printf("%s%s", i ? "\n" : "", instrument::format_section(sections[i]).c_str());
  std::fflush(stdout);
  const std::string csv = output_path(o, "csv");  // with --plot alone, PLOT.csv: the plot reads the table
  if (!csv.empty()) write_compare_csv(sections, csv);
  if (o.plot.empty()) return 0;
  if (plot("plot_compare.py", csv, o.plot) != 0) return 1;
  std::printf("wrote %s\n", o.plot.c_str());
  return 0;
}

}  // namespace loupe::cli
