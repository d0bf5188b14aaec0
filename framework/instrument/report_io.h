// Turning an EpochReport into output: one JSON line, one CSV row, the human summary printed after
// each epoch, and the per-step progress bar. A figure that was not measured is null in JSON, an
// empty cell in CSV and "n/a" on the console, never 0 (docs/design.md principle 5).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "instrument/report.h"

namespace loupe::instrument {

// One JSON object on one line (no trailing newline): every EpochReport field under its own name,
// in declaration order; empty optionals and non-finite numbers as null; advice as an array.
std::string to_json(const EpochReport& r);

// The record to_json wrote, back: every field as it was (a non-finite figure, written as null,
// comes back NaN). Throws loupe::Error saying what is wrong: not JSON, a field missing or of
// another type.
EpochReport report_from_json(const std::string& line);

// The same scalar fields as to_json, in the same order; advice joined with " | " in the last column.
std::string csv_header();
std::string to_csv_row(const EpochReport& r);  // empty cell for an unmeasured figure

// The numeric fields of to_json (the text ones and advice left out), in the same order under the
// same names, with the value where the JSON line holds a number and empty where it holds null
// (unmeasured, or not finite). TensorBoard's epoch scalars are these (instrument/tensorboard.h).
std::vector<std::pair<std::string, std::optional<double>>> numeric_fields(const EpochReport& r);

// The console summary, joined by '\n', no trailing newline: the epoch's learning and speed; on a GPU,
// the device (utilisation, busy, MFU, memory, power); the step and the host; one "advice:" line per
// item. A CPU run (device "cpu") gets no device line, as it measures none of it (the JSON and CSV
// records keep those fields, null), and its FLOP rate goes on the host line.
std::string epoch_line(const EpochReport& r);
// 1234567.8 -> "1,234,568": the whole number with thousands separators (the reports' and tables' style).
std::string thousands(double v);

// epoch_line for one run's epochs in turn, saying each piece of advice once: an epoch whose advice
// is the same as the last one printed (the same items; their figures may differ) gets one line,
// "advice unchanged since epoch N", in its place. The records (JSON, CSV) keep every epoch's advice.
class EpochConsole {
 public:
  std::string lines(const EpochReport& r);

 private:
  std::vector<std::string> advice_;
  int advice_epoch_ = 0;
};

// Writes one JSON line per epoch, flushing every line, so a run that dies keeps the epochs it
// finished. Mode::Append (loupe train --metrics) adds to what the file holds, so several runs, or a
// run and its --resume, can go into one file; Mode::Truncate (loupe bench --json) starts it afresh.
// Throws loupe::Error naming the path, and the option that named it when given ("--metrics:
// cannot write 'm.jsonl': File too large"), when it cannot write.
class JsonlWriter {
 public:
  enum class Mode { Truncate, Append };
  explicit JsonlWriter(const std::string& path, Mode mode = Mode::Truncate, const std::string& option = "");
  void write(const EpochReport& r);

 private:
  std::string path_, option_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
};

// Like JsonlWriter, for spreadsheets: the header is written at open, then one row per epoch.
class CsvWriter {
 public:
  explicit CsvWriter(const std::string& path, const std::string& option = "");
  void write(const EpochReport& r);

 private:
  std::string path_, option_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
};

// The width a line redrawn with '\r' may take on `out`: the terminal's columns (TIOCGWINSZ on
// `out`, else on stderr, where either is a terminal), else $COLUMNS, else 80.
int terminal_columns(std::FILE* out = stdout);

// One line of the progress bar, at most `columns` - 1 characters (the last column stays free, so a
// terminal never wraps it): "epoch 2/5 123/469 [=====>....] ETA 3s  loss 0.2500  64,000 samples/s".
// As the width shrinks the bar narrows (30 to 10 cells), then samples/s, the bar, the epoch, the
// ETA and the loss go, in that order; step/total stays. `loss` empty: "loss n/a".
std::string progress_line(int epoch, int epochs, int64_t step, int64_t total, double elapsed_s, int64_t samples,
                          std::optional<double> loss, int columns);

// A Keras-style progress bar: one line rewritten with '\r' (progress_line at the terminal's width).
// When `is_tty` is false (output redirected, or --plain) it prints nothing per step: logs then get
// only the epoch summary. `out` is the stream the caller checked with isatty (stdout by default).
// `columns` 0 asks terminal_columns(out) at each redraw (a resized terminal is followed).
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t total_steps, bool is_tty, std::FILE* out = stdout, int columns = 0);
  static bool stdout_is_tty();

  // Cheap when nothing is drawn: redraws at most every 0.1 s of `elapsed_s`, and once at the end.
  void update(int64_t step, double elapsed_s, int64_t samples, std::optional<double> loss);
  void finish();  // clears the line on a terminal, so the epoch summary starts on a clean line
  std::string last_line() const { return last_; }  // the last line drawn ("" if none)
  int redraws() const { return redraws_; }

 private:
  int epoch_, epochs_;
  int64_t total_;
  bool tty_;
  std::FILE* out_;
  int columns_;
  double last_draw_s_ = -1;
  bool drew_final_ = false;
  int redraws_ = 0;
  std::string last_;
};

}  // namespace loupe::instrument
