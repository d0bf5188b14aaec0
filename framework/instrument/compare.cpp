#include "instrument/compare.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <istream>
#include <iterator>
#include <map>
#include <set>

#include "core/error.h"
#include "core/text.h"
#include "instrument/report_io.h"

namespace loupe::instrument {

namespace {
// A record is a few KiB (about 90 fields and the advice); a file of runs, a few thousand of them.
// Past these a file is not what it claims to be, and reading on would only cost memory.
constexpr size_t kMaxLine = 1 << 20;
constexpr size_t kMaxRecords = 100000;

// The next line of `in` into `line` (without its newline), at most kMaxLine bytes; false at the end.
bool bounded_line(std::istream& in, std::string& line, const std::string& path, int n) {
  line.clear();
  for (int c; (c = in.get()) != EOF;) {
    if (c == '\n') return true;
    if (line.size() == kMaxLine)
      throw Error(path + ":" + std::to_string(n) + ": a line longer than 1 MiB: not a loupe record (each is a few KiB)");
    line += char(c);
  }
  return !line.empty();
}
}  // namespace

std::vector<FlatRecord> read_run(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  std::vector<FlatRecord> out;
  std::string line, err;
  for (int n = 1; bounded_line(in, line, path, n); ++n) {
    if (out.size() == kMaxRecords)
      throw Error(path + ": more than " + std::to_string(kMaxRecords) + " records: not a file of loupe runs");
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::optional<FlatRecord> r = parse_flat_json(line, &err);
    if (!r) throw Error(path + ":" + std::to_string(n) + ": not a JSON object: " + err);
    if (!text_of(*r, "record").empty()) continue;  // a summary of the epochs (--target-acc's), not an epoch
    for (const char* key : {"model", "batch", "precision", "samples_per_sec"})
      if (!r->count(key))
        throw Error(path + ":" + std::to_string(n) + ": not a loupe record (no \"" + key +
                    "\" field); expected the JSONL of `loupe train --metrics` or `loupe bench --json`");
    out.push_back(std::move(*r));
  }
  if (in.bad()) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  if (out.empty()) throw Error(path + ": no records (an empty file); expected the JSONL of `loupe train --metrics` "
                               "or `loupe bench --json`");
  return out;
}

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// What a section compares: the model, batch and precision.
std::string section_key(const FlatRecord& r) {
  return text_of(r, "model") + "\n" + std::to_string(number_of(r, "batch").value_or(0)) + "\n" + text_of(r, "precision");
}

// A group: one section's records of one run (two runs appended to one file are two groups, never
// one median; records from before run ids have an empty one and group as before).
std::string group_key(const FlatRecord& r) { return section_key(r) + "\n" + text_of(r, "run_id"); }

// The median of f over the records, skipping those where f is unmeasured.
template <class F>
std::optional<double> median_over(const std::vector<const FlatRecord*>& rs, F f) {
  std::vector<double> v;
  for (const FlatRecord* r : rs)
    if (std::optional<double> x = f(*r); x && std::isfinite(*x)) v.push_back(*x);
  return median(v);
}

std::optional<double> scaled(const FlatRecord& r, const char* key, double k) {
  std::optional<double> v = number_of(r, key);
  return v ? std::optional<double>(*v * k) : std::nullopt;
}

std::optional<double> joules_per_sample(const FlatRecord& r) {
  std::optional<double> e = number_of(r, "energy_j"), n = number_of(r, "samples"), spj = number_of(r, "samples_per_joule");
  if (e && n && *n > 0) return *e / *n;
  if (spj && *spj > 0) return 1 / *spj;
  return std::nullopt;
}

// Which records a group's medians are over, and how that is said.
std::vector<const FlatRecord*> chosen_records(const std::vector<const FlatRecord*>& all, std::string* note) {
  std::vector<const FlatRecord*> later;
  int last = 0;
  for (const FlatRecord* r : all) {
    const int e = int(number_of(*r, "epoch").value_or(1));
    last = std::max(last, e);
    if (e >= 2) later.push_back(r);
  }
  if (!later.empty()) {
    *note = "median of epochs 2.." + std::to_string(last) + " (" + std::to_string(later.size()) + " records)";
    return later;
  }
  const FlatRecord& r = *all.front();
  const bool bench = !number_of(r, "test_acc") && number_of(r, "eval_seconds").value_or(0) == 0;
  *note = bench ? (all.size() == 1 ? "bench row" : "median of " + std::to_string(all.size()) + " bench rows")
                : "epoch 1 only (includes warm-up)";
  return all;
}

RunSummary summarize_group(const std::vector<const FlatRecord*>& all, const std::string& label,
                           std::optional<double> price) {
  RunSummary s;
  const FlatRecord& first = *all.front();
  s.label = label;
  s.model = text_of(first, "model");
  s.precision = text_of(first, "precision");
  s.batch = number_of(first, "batch").value_or(0);
  s.gpu = text_of(first, "device_name");
  if (s.gpu.empty()) s.gpu = text_of(first, "device");
  s.cpu = text_of(first, "device").rfind("cpu", 0) == 0;
  std::vector<const FlatRecord*> rs = chosen_records(all, &s.note);
  s.records = int(rs.size());
  s.samples_per_sec = median_over(rs, [](const FlatRecord& r) { return number_of(r, "samples_per_sec"); });
  s.busy_pct = median_over(rs, [](const FlatRecord& r) { return scaled(r, "gpu_busy_share", 100); });
  s.mfu_pct = median_over(rs, [](const FlatRecord& r) { return scaled(r, "mfu", 100); });
  s.j_per_sample = median_over(rs, joules_per_sample);
  s.gflops = median_over(rs, [](const FlatRecord& r) { return scaled(r, "achieved_tflops", 1e3); });
  s.cpu_cores = median_over(rs, [](const FlatRecord& r) { return number_of(r, "host_cpu_util"); });
  s.rss_mib = median_over(rs, [](const FlatRecord& r) { return scaled(r, "host_rss_bytes", 1.0 / (1 << 20)); });
  s.cpu_wait_pct = median_over(rs, [](const FlatRecord& r) { return scaled(r, "host_cpu_wait_share", 100); });
  if (price && s.samples_per_sec && *s.samples_per_sec > 0)
    s.cost_per_million = *price / 3600.0 * 1e6 / *s.samples_per_sec;
  else if (!price)
    s.cost_per_million = median_over(rs, [](const FlatRecord& r) { return number_of(r, "cost_per_million_samples"); });
  return s;
}

}  // namespace

std::vector<RunSummary> summarize_run(const std::vector<FlatRecord>& records, const std::string& label,
                                      std::optional<double> price_per_hour) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const FlatRecord*>> groups;
  for (const FlatRecord& r : records) {
    std::string k = group_key(r);
    if (!groups.count(k)) order.push_back(k);
    groups[k].push_back(&r);
  }
  std::map<std::string, int> runs_in_section;
  for (const std::string& k : order) ++runs_in_section[section_key(*groups[k].front())];
  std::vector<RunSummary> out;
  for (const std::string& k : order) {
    const FlatRecord& first = *groups[k].front();
    // Several runs of one section in this file: each row says which (its id's start, its start).
    std::string l = label;
    if (runs_in_section[section_key(first)] > 1)
      l += " run " + text_of(first, "run_id").substr(0, 6) + " (" + text_of(first, "started_at") + ")";
    out.push_back(summarize_group(groups[k], l, price_per_hour));
  }
  return out;
}

std::optional<double> ratio(std::optional<double> value, std::optional<double> reference) {
  if (!value || !reference || *reference == 0) return std::nullopt;
  return *value / *reference;
}

namespace {


std::string batch_text(double b) { return fmt("%.0f", b); }

std::string group_title(const RunSummary& s) { return s.model + ", batch " + batch_text(s.batch) + ", " + s.precision; }

// "a / b" of the distinct values, in order.
template <class F>
std::string distinct(const std::vector<RunSummary>& rows, F f) {
  std::vector<std::string> seen;
  for (const RunSummary& r : rows)
    if (std::find(seen.begin(), seen.end(), f(r)) == seen.end()) seen.push_back(f(r));
  std::string o;
  for (const std::string& s : seen) o += (o.empty() ? "" : " / ") + s;
  return o;
}

}  // namespace

std::vector<CompareSection> compare_sections(const std::vector<std::vector<RunSummary>>& runs, std::string* warning) {
  std::vector<CompareSection> out;
  const bool single = std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r.size() == 1; });
  if (single) {
    CompareSection s;
    for (const auto& r : runs) s.rows.push_back(r.front());
    s.title = distinct(s.rows, [](const RunSummary& r) { return r.model; }) + ", batch " +
              distinct(s.rows, [](const RunSummary& r) { return batch_text(r.batch); }) + ", " +
              distinct(s.rows, [](const RunSummary& r) { return r.precision; });
    const std::string models = distinct(s.rows, [](const RunSummary& r) { return r.model; });
    if (models.find(" / ") != std::string::npos && warning)
      *warning = "the runs are of different models (" + models + "): their figures are compared as they are";
    out.push_back(s);
    return out;
  }
  std::vector<std::string> order;
  std::map<std::string, CompareSection> by;
  for (const auto& run : runs)
    for (const RunSummary& g : run) {
      const std::string t = group_title(g);
      if (!by.count(t)) order.push_back(t), by[t].title = t;
      by[t].rows.push_back(g);
    }
  bool shared = false;
  for (const std::string& t : order) {
    shared = shared || by[t].rows.size() > 1;
    out.push_back(by[t]);
  }
  if (!shared && warning)
    *warning = "no (model, batch, precision) is in more than one run: nothing is side by side";
  return out;
}

namespace {


std::string three(double v) { return std::fabs(v) >= 99.5 ? instrument::thousands(v) : fmt("%.3g", v); }
std::string percent(double v) { return fmt(std::fabs(v) >= 1 || v == 0 ? "%.1f%%" : "%.2f%%", v); }
std::string dollars(double v) { return "$" + fmt("%.4g", v); }
std::string mib_text(double v) { return fmt("%.0f MiB", v); }
std::string cores(double v) { return fmt("%.2f", v); }
// A ratio: two decimals, or two significant digits below 0.1 (0.0073x, not 0.01x).
std::string times(double k) { return fmt(std::fabs(k) >= 0.1 || k == 0 ? "%.2fx" : "%.2gx", k); }

// The figures compared, in the table's order.
struct Metric {
  const char* head;  // console column
  const char* csv;   // CSV column (its ratio: CSV column + "_ratio")
  std::optional<double> RunSummary::*field;
  std::string (*show)(double);
};
const Metric kMetrics[] = {
    {"samples/s", "samples_per_sec", &RunSummary::samples_per_sec, three},
    {"busy", "busy_pct", &RunSummary::busy_pct, percent},
    {"MFU", "mfu_pct", &RunSummary::mfu_pct, percent},
    {"J/sample", "j_per_sample", &RunSummary::j_per_sample, three},
    {"$/M samples", "cost_per_million_samples", &RunSummary::cost_per_million, dollars},
};
// The CPU's figures: in the CSV always (scripts/plot_compare.py draws them for CPU runs), in the
// console only for a section with a CPU run, so the GPU table keeps its width.
const Metric kCsvOnlyMetrics[] = {
    {"GFLOP/s", "gflops", &RunSummary::gflops, three},
    {"cores", "cpu_cores", &RunSummary::cpu_cores, cores},
    {"peak RSS", "rss_mib", &RunSummary::rss_mib, mib_text},
};
// The console's only: how long the threads waited for a core (not in the CSV, whose columns are fixed).
const Metric kWaited = {"waited", "", &RunSummary::cpu_wait_pct, percent};

// The table's columns. GPU runs only: the GPU's figures, all of them (n/a where none measured one, as
// always). With a CPU run: samples/s, then each figure, the CPU's and then the GPU's, that some run
// measured, so no column is n/a for every run and a CPU-only section has no GPU column.
bool has_cpu_run(const std::vector<RunSummary>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const RunSummary& r) { return r.cpu; });
}

std::vector<const Metric*> table_metrics(const std::vector<RunSummary>& rows) {
  std::vector<const Metric*> out;
  if (!has_cpu_run(rows)) {
    for (const Metric& m : kMetrics) out.push_back(&m);
    return out;
  }
  const Metric* cpu[] = {&kCsvOnlyMetrics[0], &kCsvOnlyMetrics[1], &kWaited, &kCsvOnlyMetrics[2]};
  std::vector<const Metric*> candidates(std::begin(cpu), std::end(cpu));
  for (size_t i = 1; i < std::size(kMetrics); ++i) candidates.push_back(&kMetrics[i]);
  out.push_back(&kMetrics[0]);
  for (const Metric* m : candidates)
    if (std::any_of(rows.begin(), rows.end(), [&](const RunSummary& r) { return bool(r.*m->field); }))
      out.push_back(m);
  return out;
}


std::string csv_number(std::optional<double> v) { return v ? fmt("%.6g", *v) : ""; }

}  // namespace

std::string format_section(const CompareSection& s) {
  const std::vector<const Metric*> metrics = table_metrics(s.rows);
  std::vector<std::vector<std::string>> cells{{"run", has_cpu_run(s.rows) ? "device" : "GPU"}};
  const bool mixed = s.title.find(" / ") != std::string::npos;  // show each row's model, batch, precision
  if (mixed) cells[0].push_back("model, batch, precision");
  for (const Metric* m : metrics) cells[0].push_back(m->head);
  cells[0].push_back("records");
  const RunSummary& ref = s.rows.front();
  for (const RunSummary& r : s.rows) {
    std::vector<std::string> row{r.label, r.gpu};
    if (mixed) row.push_back(group_title(r));
    for (const Metric* m : metrics) {
      const std::optional<double> v = r.*m->field, k = ratio(v, ref.*m->field);
      row.push_back(v ? m->show(*v) + " (" + (k ? times(*k) : std::string("n/a")) + ")" : "n/a");
    }
    row.push_back(r.note);
    cells.push_back(row);
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  const size_t first_metric = mixed ? 3 : 2, last_metric = first_metric + metrics.size();
  std::string o = s.title + " (ratios: this run / " + ref.label + ")\n";
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool right = c >= first_metric && c < last_metric;
      line += (c ? "  " : "") + (right ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : ""));
    }
    o += "  " + line + "\n";
  }
  return o;
}

std::string compare_csv_header() {
  std::string h = "section,label,model,batch,precision,gpu,records,note";
  for (const Metric& m : kMetrics) h += std::string(",") + m.csv + "," + m.csv + "_ratio";
  for (const Metric& m : kCsvOnlyMetrics) h += std::string(",") + m.csv + "," + m.csv + "_ratio";
  return h;
}

std::vector<std::string> compare_csv_rows(const CompareSection& s) {
  std::vector<std::string> out;
  const RunSummary& ref = s.rows.front();
  for (const RunSummary& r : s.rows) {
    std::string line = csv_cell(s.title) + "," + csv_cell(r.label) + "," + csv_cell(r.model) + "," +
                       batch_text(r.batch) + "," + csv_cell(r.precision) + "," + csv_cell(r.gpu) + "," +
                       std::to_string(r.records) + "," + csv_cell(r.note);
    for (const Metric& m : kMetrics) line += "," + csv_number(r.*m.field) + "," + csv_number(ratio(r.*m.field, ref.*m.field));
    for (const Metric& m : kCsvOnlyMetrics)
      line += "," + csv_number(r.*m.field) + "," + csv_number(ratio(r.*m.field, ref.*m.field));
    out.push_back(line);
  }
  return out;
}

}  // namespace loupe::instrument
