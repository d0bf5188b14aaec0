#include "instrument/report_io.h"

#include "core/file_check.h"
#include "instrument/json_out.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/text.h"

namespace loupe::instrument {
namespace {

// Calls f(name, field) for every scalar field of EpochReport, in declaration order. JSON, CSV and
// the reader (report_from_json) all walk this one list, so they cannot disagree; the macro keeps
// each name equal to its field. R is EpochReport or const EpochReport.
template <class R, class F>
void visit_fields(R& r, F&& f) {
#define LOUPE_FIELD(x) f(#x, r.x)
  LOUPE_FIELD(run_id); LOUPE_FIELD(started_at); LOUPE_FIELD(seed); LOUPE_FIELD(lr); LOUPE_FIELD(threads);
  LOUPE_FIELD(cpu_model);
  LOUPE_FIELD(model); LOUPE_FIELD(device); LOUPE_FIELD(device_name);
  LOUPE_FIELD(precision);  // its name in every format
  LOUPE_FIELD(batch); LOUPE_FIELD(epoch); LOUPE_FIELD(epochs); LOUPE_FIELD(steps); LOUPE_FIELD(samples);
  LOUPE_FIELD(train_loss); LOUPE_FIELD(train_acc); LOUPE_FIELD(test_acc); LOUPE_FIELD(test_loss);
  LOUPE_FIELD(loss_scale); LOUPE_FIELD(skipped_steps);
  LOUPE_FIELD(epoch_seconds); LOUPE_FIELD(train_seconds); LOUPE_FIELD(eval_seconds);
  LOUPE_FIELD(samples_per_sec); LOUPE_FIELD(step_ms_p50); LOUPE_FIELD(step_ms_p95);
  LOUPE_FIELD(issue_ms_p50); LOUPE_FIELD(issue_ms_p95); LOUPE_FIELD(data_wait_ms_p50);
  LOUPE_FIELD(data_wait_ms_p95); LOUPE_FIELD(data_wait_share); LOUPE_FIELD(data_gpu_wait_share);
  LOUPE_FIELD(graph_steps); LOUPE_FIELD(graph_kernels); LOUPE_FIELD(graph_why);
  LOUPE_FIELD(flops_per_sample); LOUPE_FIELD(achieved_tflops); LOUPE_FIELD(peak_tflops);
  LOUPE_FIELD(peak_source); LOUPE_FIELD(mfu);
  LOUPE_FIELD(nvml_samples); LOUPE_FIELD(nvml_why); LOUPE_FIELD(gpu_util_mean); LOUPE_FIELD(gpu_util_max);
  LOUPE_FIELD(mem_util_mean); LOUPE_FIELD(mem_used_max_bytes); LOUPE_FIELD(mem_total_bytes);
  LOUPE_FIELD(power_mean_w); LOUPE_FIELD(power_max_w); LOUPE_FIELD(energy_j); LOUPE_FIELD(samples_per_joule);
  LOUPE_FIELD(temp_max_c); LOUPE_FIELD(sm_clock_mean_mhz); LOUPE_FIELD(throttle);
  LOUPE_FIELD(gpu_sm_active); LOUPE_FIELD(gpu_sm_occupancy); LOUPE_FIELD(gpu_tensor_active);
  LOUPE_FIELD(gpu_dram_active); LOUPE_FIELD(gpu_graphics_active); LOUPE_FIELD(gpm_why);
  LOUPE_FIELD(gpu_busy_share); LOUPE_FIELD(gpu_boundary_share); LOUPE_FIELD(gpu_kernels_per_step);
  LOUPE_FIELD(busy_why); LOUPE_FIELD(alloc_peak_bytes);
  LOUPE_FIELD(host_cpu_util); LOUPE_FIELD(host_rss_bytes); LOUPE_FIELD(host_cpu_wait_share);
  LOUPE_FIELD(cost_epoch); LOUPE_FIELD(cost_per_million_samples);
  LOUPE_FIELD(rank); LOUPE_FIELD(world_size); LOUPE_FIELD(world_samples_per_sec); LOUPE_FIELD(scaling_efficiency);
  LOUPE_FIELD(allreduce_bytes_per_step); LOUPE_FIELD(nccl_share); LOUPE_FIELD(nccl_exposed_share); LOUPE_FIELD(bus_gbps);
  LOUPE_FIELD(slowest_rank); LOUPE_FIELD(straggler_share);
#undef LOUPE_FIELD
}

// Shortest text that reads back as the same double; locale-independent (unlike printf).
std::string num(double v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}


// The text of one field for CSV: an empty cell where unmeasured; "nan"/"inf" kept (a diverged loss
// is a measured fact; JSON, which has neither, writes null: to_json).
template <class T>
std::string field_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return csv_cell(v);
  } else if constexpr (std::is_same_v<T, Precision>) {
    return precision_name(v);
  } else if constexpr (std::is_same_v<T, Opt> || std::is_same_v<T, std::optional<uint64_t>>) {
    return v ? field_text(*v) : "";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isfinite(v)) return num(v);
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  } else {
    return std::to_string(v);
  }
}

// ---- console formatting -------------------------------------------------------------------


// About three significant digits; whole numbers with thousands separators from 100 up.
std::string n3(double v) {
  if (!std::isfinite(v)) return fmt("%g", v);
  return std::fabs(v) >= 99.5 ? thousands(v) : fmt("%.3g", v);
}

// Small shares keep two decimals, so a 0.04% MFU does not read as 0.0%.
std::string pct(double share) {
  const double p = share * 100;
  return fmt(p == 0 || std::fabs(p) >= 1 ? "%.1f%%" : "%.2f%%", p);
}

std::string bytes(double b) {
  return b >= (1 << 30) ? fmt("%.1f GiB", b / (1 << 30)) : thousands(b / (1 << 20)) + " MiB";
}

std::string energy(double j) {
  return j >= 1e6 ? n3(j / 1e6) + " MJ" : j >= 1e3 ? n3(j / 1e3) + " kJ" : n3(j) + " J";
}

// "n/a" when unmeasured, else the formatted value.
template <class F>
std::string or_na(const Opt& v, F&& f) {
  return v ? f(*v) : "n/a";
}

std::string duration(double s) {
  if (s < 60) return fmt("%.0fs", s);
  int t = int(s + 0.5), h = t / 3600, m = t / 60 % 60, sec = t % 60;
  char buf[32];
  if (h) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", h, m, sec);
  else std::snprintf(buf, sizeof buf, "%d:%02d", m, sec);
  return buf;
}

std::FILE* open_or_throw(const std::string& path, const char* mode = "w") {
  require_regular_output(path, "output file");  // a FIFO would block the open, a device swallow the records
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f)
    throw Error("cannot open '" + path + "' for writing: " + std::strerror(errno) +
                "; check that its directory exists and is writable");
  return f;
}

void put_line(std::FILE* f, const std::string& path, const std::string& option, const std::string& line) {
  if (std::fputs((line + "\n").c_str(), f) < 0 || std::fflush(f) != 0)
    throw Error((option.empty() ? "cannot write to '" : option + ": cannot write '") + path + "': " +
                std::strerror(errno));
}

// Line 2 of the epoch summary: the GPU. NVML's reason is shown once, where its first figure would be.
std::string device_line(const EpochReport& r) {
  std::string o = "  GPU util " + or_na(r.gpu_util_mean, [](double u) { return fmt("%.0f%%", u); });
  if (r.gpu_util_max) o += fmt(" (max %.0f)", *r.gpu_util_max);
  if (!r.gpu_util_mean && !r.nvml_why.empty()) o += " (" + r.nvml_why + ")";
  auto whole = [](double v) { return fmt("%.0f%%", v); };
  if (r.gpu_sm_active)
    o += "  SM active " + whole(*r.gpu_sm_active) + " (occupancy " + or_na(r.gpu_sm_occupancy, whole) + ", tensor " +
         or_na(r.gpu_tensor_active, whole) + ", DRAM " + or_na(r.gpu_dram_active, whole) + ")";
  else if (r.gpu_util_mean)
    o += "  SM active n/a" + (r.gpm_why.empty() ? std::string() : " (" + r.gpm_why + ")");
  o += "  busy " + or_na(r.gpu_busy_share, pct);
  if (r.gpu_boundary_share) {
    o += " + boundaries " + pct(*r.gpu_boundary_share);
    if (r.gpu_kernels_per_step) o += fmt(" (%.0f kernels a step)", *r.gpu_kernels_per_step);
  }
  if (r.mfu && r.peak_tflops) {
    o += "  MFU " + pct(*r.mfu) + " of " + n3(*r.peak_tflops) + " TFLOP/s " + precision_name(r.precision);
  } else {
    o += "  MFU n/a";
    if (r.achieved_tflops) o += " (achieved " + n3(*r.achieved_tflops) + " TFLOP/s)";
  }
  o += "  mem ";
  if (r.mem_used_max_bytes && r.mem_total_bytes)
    o += fmt("%.1f", *r.mem_used_max_bytes / (1 << 30)) + "/" + bytes(*r.mem_total_bytes);
  else
    o += "n/a";
  o += "  power " + or_na(r.power_mean_w, [](double w) { return n3(w) + " W"; });
  // samples/J derives from the energy counter, so it is shown with it or not at all.
  if (r.energy_j) o += "  " + energy(*r.energy_j) + "  " + or_na(r.samples_per_joule, n3) + " samples/J";
  else o += "  energy n/a";
  if (!r.throttle.empty()) o += "  throttled: " + r.throttle;
  return o;
}

}  // namespace

std::string thousands(double v) {
  std::string d = fmt("%.0f", std::fabs(v)), o;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) o += ',';
    o += d[i];
  }
  return (v < 0 ? "-" : "") + o;
}

namespace {
// One field's JSON value: a string, a number (json_number: null where not finite), or null where
// unmeasured (an empty optional).
template <class T>
nlohmann::ordered_json json_value(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<T, Precision>) {
    return precision_name(v);
  } else if constexpr (std::is_same_v<T, Opt>) {
    return v ? json_number(*v) : nlohmann::ordered_json(nullptr);
  } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);  // exact: a seed past 2^53
  } else if constexpr (std::is_floating_point_v<T>) {
    return json_number(double(v));
  } else {
    return v;
  }
}
}  // namespace

std::string to_json(const EpochReport& r) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  visit_fields(r, [&](const char* name, const auto& v) { j[name] = json_value(v); });
  j["advice"] = r.advice;
  return json_text(j);
}

EpochReport report_from_json(const std::string& line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a JSON record: ") + e.what());
  }
  if (!j.is_object()) throw Error("not a JSON record: a loupe metrics record is an object");
  EpochReport r;
  visit_fields(r, [&](const char* name, auto& v) {
    using T = std::decay_t<decltype(v)>;
    const auto it = j.find(name);
    if (it == j.end()) throw Error(std::string("the record has no field '") + name + "'");
    const auto wrong = [&](const char* what) { return Error(std::string("field '") + name + "' is not " + what); };
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, Precision>) {
      if (!it->is_string()) throw wrong("a string");
      if constexpr (std::is_same_v<T, Precision>) v = parse_precision(it->template get<std::string>());
      else v = it->template get<std::string>();
    } else if constexpr (std::is_same_v<T, Opt> || std::is_same_v<T, std::optional<uint64_t>>) {
      if (it->is_null()) v.reset();
      else if (std::is_same_v<T, Opt> ? !it->is_number() : !it->is_number_unsigned()) throw wrong("a number or null");
      else v = it->template get<typename T::value_type>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (it->is_null()) v = std::numeric_limits<T>::quiet_NaN();  // to_json writes a non-finite figure as null
      else if (!it->is_number()) throw wrong("a number");
      else v = it->template get<T>();
    } else {
      if (!it->is_number_integer()) throw wrong("a whole number");
      v = it->template get<T>();
    }
  });
  const auto advice = j.find("advice");
  if (advice == j.end() || !advice->is_array()) throw Error("the record's 'advice' is not a list");
  for (const auto& a : *advice) {
    if (!a.is_string()) throw Error("the record's 'advice' holds something other than text");
    r.advice.push_back(a.get<std::string>());
  }
  return r;
}

std::string csv_header() {
  std::vector<std::string> names;
  const EpochReport none;
  visit_fields(none, [&](const char* name, const auto&) { names.push_back(name); });
  names.push_back("advice");
  return join(names, ",");
}

std::string to_csv_row(const EpochReport& r) {
  std::vector<std::string> cells;
  visit_fields(r, [&](const char*, const auto& v) { cells.push_back(field_text(v)); });
  cells.push_back(csv_cell(join(r.advice, " | ")));
  return join(cells, ",");
}

std::vector<std::pair<std::string, std::optional<double>>> numeric_fields(const EpochReport& r) {
  std::vector<std::pair<std::string, std::optional<double>>> out;
  visit_fields(r, [&](const char* name, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, Opt>) {
      out.emplace_back(name, v && std::isfinite(*v) ? v : std::nullopt);
    } else if constexpr (std::is_arithmetic_v<T>) {
      const double d = double(v);
      out.emplace_back(name, std::isfinite(d) ? std::optional<double>(d) : std::nullopt);
    }
  });
  return out;
}

std::string epoch_line(const EpochReport& r) {
  const int width = int(std::to_string(r.epochs).size());
  char head[64];
  std::snprintf(head, sizeof head, "epoch %*d/%d", width, r.epoch, r.epochs);
  // A regression (mean squared error) has no accuracy: its train accuracy is NaN, and the line
  // names the losses alone rather than an accuracy of n/a.
  const bool accuracy = std::isfinite(r.train_acc);
  std::string o = std::string(head) + "  loss " + fmt("%.4f", r.train_loss) +
                  (accuracy ? "  train acc " + fmt("%.2f%%", 100 * r.train_acc) : std::string()) +
                  (r.test_loss ? "  test loss " + fmt("%.4f", *r.test_loss) : std::string()) +
                  (accuracy ? "  test acc " + or_na(r.test_acc, [](double a) { return fmt("%.2f%%", 100 * a); })
                            : std::string()) +
                  "  " + n3(r.epoch_seconds) + " s  " + n3(r.samples_per_sec) + " samples/s";
  if (r.loss_scale) o += fmt("  loss scale %g", *r.loss_scale) + fmt(" (%.0f skipped)", r.skipped_steps.value_or(0));

  // Line 2: the device, on a GPU only (a CPU run measures none of it; the files keep the fields).
  const bool cpu = r.device.rfind("cpu", 0) == 0;
  if (!cpu) o += "\n" + device_line(r);
  // Line 3: the step and the host.
  o += "\n  step p50 " + or_na(r.step_ms_p50, [](double m) { return n3(m) + " ms"; });
  o += " p95 " + or_na(r.step_ms_p95, [](double m) { return n3(m) + " ms"; });
  if (r.graph_steps && *r.graph_steps > 0) {
    o += "  CUDA graph " + fmt("%.0f", *r.graph_steps) + "/" + std::to_string(r.steps) + " steps";
    if (r.graph_kernels) o += fmt(" (%.0f kernels)", *r.graph_kernels);
  } else if (!r.graph_why.empty() && !cpu) {
    o += "  eager (" + r.graph_why + ")";
  }
  // The host's issue time is the step less its wait for the device; on the CPU the work runs in the
  // call, so it is the step again (less the data wait): the files keep it, the line does not.
  if (!cpu) o += "  host issue " + or_na(r.issue_ms_p50, [](double m) { return n3(m) + " ms"; });
  o += "  data wait " + or_na(r.data_wait_share, pct);
  if (r.data_gpu_wait_share && *r.data_gpu_wait_share >= 0.005) o += " (ahead of the GPU " + pct(*r.data_gpu_wait_share) + ")";
  o += "  CPU " + or_na(r.host_cpu_util, [](double c) { return fmt("%.1f cores", c); });
  if (r.host_cpu_wait_share && *r.host_cpu_wait_share >= 0.005) o += " (waited " + pct(*r.host_cpu_wait_share) + " for a core)";
  o += "  RSS " + or_na(r.host_rss_bytes, bytes);
  if (r.alloc_peak_bytes) o += "  pool peak " + bytes(*r.alloc_peak_bytes);
  if (cpu && r.mfu && r.peak_tflops) o += "  MFU " + pct(*r.mfu) + " of " + n3(*r.peak_tflops) + " TFLOP/s";
  else if (cpu && r.achieved_tflops) o += "  " + n3(*r.achieved_tflops * 1e3) + " GFLOP/s";
  // Cost is opt-in (--price-per-hour): shown only when asked for, not as n/a on every run.
  if (r.cost_epoch) o += "  $" + fmt("%.4g", *r.cost_epoch) + "/epoch";
  if (r.cost_per_million_samples) o += "  $" + fmt("%.4g", *r.cost_per_million_samples) + "/M samples";

  for (const auto& a : r.advice) o += "\n  advice: " + a;
  return o;
}

namespace {
// Advice as the console compares it: its words, with every run of digits (a share, a size) as '#'.
std::vector<std::string> advice_keys(const std::vector<std::string>& advice) {
  std::vector<std::string> keys;
  for (const std::string& a : advice) {
    std::string k;
    for (char c : a)
      if (!std::isdigit(static_cast<unsigned char>(c))) k += c;
      else if (k.empty() || k.back() != '#') k += '#';
    keys.push_back(k);
  }
  return keys;
}
}  // namespace

std::string EpochConsole::lines(const EpochReport& r) {
  std::vector<std::string> keys = advice_keys(r.advice);
  if (keys.empty() || keys != advice_) {
    advice_ = std::move(keys);
    advice_epoch_ = r.epoch;
    return epoch_line(r);
  }
  EpochReport quiet = r;
  quiet.advice.clear();
  return epoch_line(quiet) + "\n  advice unchanged since epoch " + std::to_string(advice_epoch_);
}

JsonlWriter::JsonlWriter(const std::string& path, Mode mode, const std::string& option)
    : path_(path), option_(option), f_(open_or_throw(path, mode == Mode::Append ? "a" : "w"), &std::fclose) {
  // A record leaves in one write(): the ranks of a data-parallel run append to one file (O_APPEND),
  // and a line split over two writes could interleave with another rank's.
  std::setvbuf(f_.get(), nullptr, _IOFBF, 1 << 20);
}

void JsonlWriter::write(const EpochReport& r) { put_line(f_.get(), path_, option_, to_json(r)); }

CsvWriter::CsvWriter(const std::string& path, const std::string& option)
    : path_(path), option_(option), f_(open_or_throw(path), &std::fclose) {
  put_line(f_.get(), path_, option_, csv_header());
}

void CsvWriter::write(const EpochReport& r) { put_line(f_.get(), path_, option_, to_csv_row(r)); }

// ---- progress bar ---------------------------------------------------------------------------

int terminal_columns(std::FILE* out) {
  for (int fd : {fileno(out), fileno(stderr)}) {
    winsize ws{};
    if (fd >= 0 && isatty(fd) == 1 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  }
  if (const char* c = std::getenv("COLUMNS")) {
    char* e = nullptr;
    long v = std::strtol(c, &e, 10);
    if (e != c && *e == '\0' && v > 0 && v < 100000) return int(v);
  }
  return 80;
}

std::string progress_line(int epoch, int epochs, int64_t step, int64_t total, double elapsed_s, int64_t samples,
                          std::optional<double> loss, int columns) {
  const size_t limit = size_t(std::max(columns, 2) - 1);
  const int w = int(std::to_string(std::max<int64_t>(total, 0)).size());
  char buf[96];
  std::snprintf(buf, sizeof buf, "epoch %d/%d", epoch, epochs);
  const std::string head = buf;
  std::snprintf(buf, sizeof buf, "%*lld/%lld", w, (long long)step, (long long)total);
  const std::string count = buf;
  std::string eta;
  if (total > 0 && step >= total) eta = fmt("%.2f", elapsed_s) + " s";
  else if (total > 0 && step > 0) eta = "ETA " + duration(elapsed_s / step * (total - step));
  const std::string loss_text = "loss " + (loss ? fmt("%.4f", *loss) : std::string("n/a"));
  const std::string rate = elapsed_s > 0 ? n3(samples / elapsed_s) + " samples/s" : "";

  // The layouts, widest first: the first that fits wins (the bar takes what is left, 10 to 30 cells).
  struct Layout { bool head, bar, eta, loss, rate; };
  constexpr Layout layouts[] = {{true, true, true, true, true},    {true, true, true, true, false},
                                {true, false, true, true, false},  {false, false, true, true, false},
                                {false, false, false, true, false}, {false, false, false, false, false}};
  for (const Layout& l : layouts) {
    std::string before = l.head ? head + " " + count : count, after;
    if (l.eta && !eta.empty()) after += " " + eta;
    if (l.loss) after += "  " + loss_text;
    if (l.rate && !rate.empty()) after += "  " + rate;
    if (!(l.bar && total > 0)) {
      if (before.size() + after.size() <= limit) return before + after;
      continue;
    }
    const size_t fixed = before.size() + 3 + after.size();  // " [" and "]"
    if (fixed + 10 > limit) continue;
    const int bar = int(std::min<size_t>(30, limit - fixed)), done = int(bar * std::min<int64_t>(step, total) / total);
    return before + " [" + std::string(done, '=') + (done < bar ? ">" : "") +
           std::string(std::max(0, bar - done - 1), '.') + "]" + after;
  }
  return count.substr(0, limit);
}

ProgressBar::ProgressBar(int epoch, int epochs, int64_t total_steps, bool is_tty, std::FILE* out, int columns)
    : epoch_(epoch), epochs_(epochs), total_(total_steps), tty_(is_tty), out_(out), columns_(columns) {}

bool ProgressBar::stdout_is_tty() { return isatty(fileno(stdout)) == 1; }

void ProgressBar::update(int64_t step, double elapsed_s, int64_t samples, std::optional<double> loss) {
  if (!tty_) return;
  const bool final_step = total_ > 0 && step >= total_;
  // A terminal redrawn every step costs more than a small model's step: ~10 redraws a second.
  if (final_step ? drew_final_ : (last_draw_s_ >= 0 && elapsed_s - last_draw_s_ < 0.1)) return;
  last_draw_s_ = elapsed_s;
  drew_final_ = final_step;

  const int columns = columns_ > 0 ? columns_ : terminal_columns(out_);
  const std::string line = progress_line(epoch_, epochs_, step, total_, elapsed_s, samples, loss, columns);
  // Pad over the previous line's tail (the new line may be shorter), never past the last column.
  std::string padded = line;
  const size_t pad_to = std::min(last_.size(), size_t(std::max(columns, 2) - 1));
  if (padded.size() < pad_to) padded += std::string(pad_to - padded.size(), ' ');
  std::fprintf(out_, "\r%s", padded.c_str());
  std::fflush(out_);
  last_ = line;
  ++redraws_;
}

void ProgressBar::finish() {
  if (!tty_ || last_.empty()) return;
  std::fprintf(out_, "\r%s\r", std::string(last_.size(), ' ').c_str());
  std::fflush(out_);
}

}  // namespace loupe::instrument
