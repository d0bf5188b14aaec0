#include "run/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/precision.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "instrument/report_io.h"
#include "run/interrupt.h"
#include "run/process.h"

namespace loupe::run {

TuneObjective parse_objective(const std::string& name) {
  if (name == "speed") return TuneObjective::Speed;
  if (name == "energy") return TuneObjective::Energy;
  throw Error("--objective takes speed (samples/s) or energy (samples/J), got '" + name + "'");
}

namespace {

// A rate as a command line gives it: the shortest of %g's forms that reads back the same.
std::string rate(double v) {
  for (int digits = 6; digits <= 17; ++digits) {
    std::string s = printed("%.*g", digits, v);
    if (std::stod(s) == v) return s;
  }
  return printed("%.17g", v);
}

// A word as a POSIX shell reads it back.
std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+@%") ==
                        std::string::npos)
    return w;
  std::string q = "'";
  for (char ch : w) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// "--batch" for "-b", "--workers" for "-j", "--epochs" for "-e"; the name of "--x=v" is "--x".
std::string option_name(const std::string& w) {
  if (w == "-b") return "--batch";
  if (w == "-j") return "--workers";
  if (w == "-e") return "--epochs";
  return w.substr(0, w.find('='));
}

}  // namespace

std::vector<std::string> tune_words(const std::string& model, const std::vector<std::string>& args,
                                    const std::vector<std::string>& row) {
  // tune's own options, and the flags among the options a row sets (the others take a value).
  const std::set<std::string> own{"--rounds", "--min-seconds", "--objective", "--metrics", "--recipe-only"};
  const std::set<std::string> flags{"--resident", "--recipe-only"};
  std::set<std::string> drop = own;
  for (const std::string& w : row)
    if (w.rfind("--", 0) == 0) drop.insert(w);
  std::vector<std::string> out{model};
  bool named = false;  // the model's own word
  for (size_t i = 0; i < args.size(); ++i) {
    if (!named && args[i] == model) {
      named = true;
      continue;
    }
    const std::string name = option_name(args[i]);
    if (drop.count(name)) {
      const bool has_value = args[i].find('=') == std::string::npos && !flags.count(name);
      if (has_value) ++i;  // its value goes with it
      continue;
    }
    out.push_back(args[i]);
  }
  out.insert(out.end(), row.begin(), row.end());
  return out;
}

std::string tune_command(const std::string& model, const std::vector<std::string>& args,
                         const std::vector<std::string>& row) {
  std::string out = "loupe train";
  for (const std::string& w : tune_words(model, args, row)) out += " " + shell_word(w);
  return out;
}

namespace {

std::string advice_kinds(const std::string& line) {
  std::string kinds;
  if (line.find("--precision") != std::string::npos || line.find("fp16") != std::string::npos) kinds += " precision";
  if (line.find("batch") != std::string::npos) kinds += " batch";
  if (line.find("--workers") != std::string::npos || line.find("--prefetch") != std::string::npos ||
      line.find("on the GPU") != std::string::npos || line.find("--resident") != std::string::npos)
    kinds += " feed";
  if (line.find("--threads") != std::string::npos || line.find("for a core") != std::string::npos) kinds += " threads";
  return kinds;
}

TuneRow tune_row(const RunConfig& base, const std::string& kind, std::vector<std::string> options) {
  TuneRow r;
  r.kind = kind;
  r.config = base;
  r.options = std::move(options);
  for (const std::string& w : r.options) {
    if (w == "--lr") break;  // the rate follows from the batch: the setting is the batch
    r.setting += (r.setting.empty() ? "" : " ") + w;
  }
  return r;
}

}  // namespace

std::vector<TuneRow> tune_candidates(const RunConfig& recipe, const instrument::EpochReport& measured, int threads) {
  const bool cuda = recipe.device.is_cuda();
  const Precision p = recipe.trainer.precision.value_or(Precision::FP32);
  std::vector<TuneRow> rows;
  // fp16, bf16 and tf32 are GPU modes (tensor cores): the CPU runs fp32.
  for (Precision q : {Precision::BF16, Precision::FP16, Precision::TF32}) {
    if (q == p || !cuda) continue;
    TuneRow r = tune_row(recipe, "precision", {"--precision", precision_name(q)});
    r.config.trainer.precision = q;
    rows.push_back(r);
  }
  const double lr = recipe.lr.value_or(recipe.model.recipe.lr);
  for (int64_t k : {2, 4}) {
    const int64_t b = recipe.batch * k;
    TuneRow r = tune_row(recipe, "batch", {"--batch", std::to_string(b), "--lr", rate(lr * double(k))});
    r.config.batch = b;
    r.note = "the rate linear scaling gives: --lr " + rate(lr * double(k)) + " (measured at it; check the accuracy)";
    rows.push_back(r);
  }
  if (!recipe.feed.resident) {
    TuneRow res = tune_row(recipe, "feed", {"--resident"});
    res.config.feed.resident = true;
    if (recipe.data.augment) res.note = "resident data trains without the recipe's augmentation (the loader's workers apply it)";
    rows.push_back(res);
    TuneRow w = tune_row(recipe, "feed", {"--workers", std::to_string(recipe.feed.workers * 2)});
    w.config.feed.workers *= 2;
    rows.push_back(w);
    TuneRow pf = tune_row(recipe, "feed", {"--prefetch", std::to_string(recipe.feed.prefetch * 2)});
    pf.config.feed.prefetch *= 2;
    rows.push_back(pf);
  }
  if (!cuda)
    for (int t : std::set<int>{1, threads / 2})
      if (t >= 1 && t < threads) {
        TuneRow r = tune_row(recipe, "threads", {"--threads", std::to_string(t)});
        r.config.threads = t;
        rows.push_back(r);
      }
  std::string named;
  for (const std::string& line : measured.advice) named += advice_kinds(line);
  for (TuneRow& r : rows) r.advised = named.find(" " + r.kind) != std::string::npos;
  std::stable_partition(rows.begin(), rows.end(), [](const TuneRow& r) { return r.advised; });
  return rows;
}

// One that spans epochs runs them as `loupe train` does, each after an evaluation, and after one
// whole epoch more of warm-up (its last, smaller batch has shapes of its own, whose algorithms are
// chosen on first use).
instrument::EpochReport measure_stretch(const RunConfig& rc, double seconds) {
  RunConfig r = rc;
  r.epochs = 1000000;  // every window is followed by another: the loader prepares the next epoch
  r.max_steps = -1;
  r.save.clear();
  r.save_keras.clear();
  r.save_best = false;
  r.trace.clear();
  r.monitor.timeline.clear();
  r.profile_steps = {-1, -1};
  Run run(std::move(r));
  const bool cuda = run.config().device.is_cuda();
  run.measure(1, cuda ? 20 : 3);
  const instrument::EpochReport probe = run.measure(2, cuda ? 10 : 2);
  const double per_step = probe.train_seconds / double(std::max<int64_t>(1, probe.steps));
  const int64_t need = std::clamp<int64_t>(int64_t(std::ceil(seconds / std::max(per_step, 1e-7))), 5, 10000000);
  const int64_t epoch = run.epoch_steps();
  int e = probe.epoch + 1;
  if (need > epoch) e = run.measure(e, epoch, true).epoch + 1;
  instrument::EpochReport stretch = run.measure(e, need, need > epoch);
  run.stop_feed();
  return stretch;
}

std::function<instrument::EpochReport(const TuneRow&, double)> measure_by_command(const std::string& exe,
                                                                                 const TuneConfig& c) {
  return [exe, model = c.model.empty() ? c.base.model.name : c.model, args = c.args](const TuneRow& row, double seconds) {
    std::vector<std::string> words = tune_words(model, args, row.options);
    // The CPU's rows run at the count tune named (the recipe's), not one the governor would change.
    if (row.config.threads && std::find(words.begin(), words.end(), "--threads") == words.end())
      words.insert(words.end(), {"--threads", std::to_string(*row.config.threads)});
    TempFile metrics("loupe-tune-row"), log("loupe-tune-log");
    std::vector<std::string> argv{"tune"};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), {"--recipe-only", "--rounds", "1", "--min-seconds", printed("%.17g", seconds), "--metrics",
                             metrics.path()});
    const int rc = run_child(exe, argv, log.path());
    if (interrupt_requested()) throw train::Interrupted();
    const std::string text = text_or_empty(metrics.path());
    if (rc != 0 || text.empty()) {
      std::string why = tail_of(log.path(), 1);
      while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
      if (why.rfind("loupe: ", 0) == 0) why.erase(0, 7);
      throw Error(why.empty() ? printed("its process ended with status %d and said nothing", rc) : why);
    }
    return instrument::report_from_json(text.substr(0, text.find('\n')));
  };
}

namespace {

// A row's gain over the recipe by the objective (0 where unmeasured).
double objective_gain(const TuneRow& r, TuneObjective o) { return o == TuneObjective::Speed ? r.gain : r.energy_gain.value_or(0); }

double figure(const instrument::EpochReport& r, TuneObjective o) {
  if (o == TuneObjective::Speed) return r.samples_per_sec;
  return r.samples_per_joule.value_or(0);
}

// Measures `row` once more; its report becomes the median of its rounds (by the objective).
void measure_row(TuneRow& row, double seconds, const TuneConfig& c) {
  if (!row.skipped.empty()) return;
  try {
    row.rounds.push_back(c.measure ? c.measure(row, seconds) : measure_stretch(row.config, seconds));
    std::vector<const instrument::EpochReport*> by;
    for (const instrument::EpochReport& m : row.rounds) by.push_back(&m);
    std::stable_sort(by.begin(), by.end(), [&c](const auto* a, const auto* b) { return figure(*a, c.objective) < figure(*b, c.objective); });
    row.report = *by[(by.size() - 1) / 2];
  } catch (const train::Interrupted&) {
    throw;
  } catch (const std::exception& e) {  // does not fit, not on this device: the row says why
    row.skipped = e.what();
  }
}

// How far the recipe's rounds differed (max over min, less one): the noise a gain must exceed.
double round_spread(const TuneRow& recipe) {
  const auto [lo, hi] = std::minmax_element(recipe.rounds.begin(), recipe.rounds.end(), [](const auto& a, const auto& b) {
    return a.samples_per_sec < b.samples_per_sec;
  });
  return recipe.rounds.size() > 1 ? hi->samples_per_sec / lo->samples_per_sec - 1 : 0;
}

// The best row of each kind that beat the recipe by more than 2 % and the recipe's own spread,
// together: one row, or none when fewer than two kinds gained.
std::optional<TuneRow> combined(const std::vector<TuneRow>& rows, TuneObjective o) {
  const double least = 1 + std::max(0.02, round_spread(rows.front()));
  std::map<std::string, const TuneRow*> best;
  for (const TuneRow& r : rows) {
    if (r.kind == "recipe" || !r.report) continue;
    const double g = objective_gain(r, o);
    if (g <= least) continue;
    const TuneRow*& b = best[r.kind];
    if (!b || g > objective_gain(*b, o)) b = &r;
  }
  if (best.size() < 2) return std::nullopt;
  TuneRow c = rows.front();
  c.kind = "combined";
  c.report.reset();
  c.rounds.clear();
  c.setting.clear();
  c.options.clear();
  for (const auto& [kind, r] : best) {
    c.options.insert(c.options.end(), r->options.begin(), r->options.end());
    c.setting += (c.setting.empty() ? "" : " ") + r->setting;
    if (!r->note.empty()) c.note += (c.note.empty() ? "" : "\n  ") + r->note;
    if (kind == "precision") c.config.trainer.precision = r->config.trainer.precision;
    if (kind == "batch") c.config.batch = r->config.batch;
    if (kind == "feed") c.config.feed = r->config.feed;
    if (kind == "threads") c.config.threads = r->config.threads;
  }
  return c;
}

void gains(std::vector<TuneRow>& rows) {
  const instrument::EpochReport& base = *rows.front().report;
  for (TuneRow& r : rows) {
    if (!r.report) continue;
    r.gain = base.samples_per_sec > 0 ? r.report->samples_per_sec / base.samples_per_sec : 0;
    if (r.report->samples_per_joule && base.samples_per_joule && *base.samples_per_joule > 0)
      r.energy_gain = *r.report->samples_per_joule / *base.samples_per_joule;
  }
}

std::vector<std::string> advice_measured(const std::vector<TuneRow>& rows) {
  std::vector<std::string> out;
  for (const std::string& line : rows.front().report->advice) {
    const std::string kinds = advice_kinds(line);
    if (kinds.empty()) continue;  // it names no change tune tries
    std::string measured;
    for (const TuneRow& r : rows)
      if (r.kind != "recipe" && r.kind != "combined" && r.report && kinds.find(" " + r.kind) != std::string::npos)
        measured += (measured.empty() ? "" : ", ") + r.setting + " " + printed("%.2fx", r.gain);
    out.push_back(line + (measured.empty() ? "" : "\n    measured: " + measured));
  }
  return out;
}

}  // namespace

TuneResult tune(const TuneConfig& c) {
  TuneResult res;
  res.objective = c.objective;
  res.cuda = c.base.device.is_cuda();
  if (c.objective == TuneObjective::Energy && !res.cuda)
    throw Error("--objective energy needs a GPU's energy counter; on the CPU loupe measures no energy (--objective speed)");
  const double seconds = c.seconds > 0 ? c.seconds : res.cuda ? 2.0 : 1.0;
  // A GPU's rounds agree within a per cent; a CPU's drift with what else the machine runs.
  const int rounds = c.rounds > 0 ? c.rounds : res.cuda ? 2 : 3;
  RunConfig base = c.base;
  if (!res.cuda && !base.threads) base.threads = num_threads();  // every row at a count it names
  TuneRow recipe = tune_row(base, "recipe", {});
  recipe.setting = "recipe";
  measure_row(recipe, seconds, c);
  if (!recipe.report) throw Error("the recipe's run could not be measured: " + recipe.skipped);
  if (c.objective == TuneObjective::Energy && !recipe.report->samples_per_joule)
    throw Error("--objective energy: the recipe's run measured no energy (" +
                (recipe.report->nvml_why.empty() ? std::string("no reading of the energy counter") : recipe.report->nvml_why) +
                "); --objective speed needs none");
  res.rows.push_back(recipe);
  if (c.on_row) c.on_row(res.rows.back());
  // The grid around the recipe as it ran: its batch and precision, named.
  RunConfig grid = base;
  grid.batch = recipe.report->batch;
  grid.trainer.precision = recipe.report->precision;
  if (!c.recipe_only)
    for (TuneRow& r : tune_candidates(grid, *recipe.report, base.threads.value_or(num_threads()))) {
      res.rows.push_back(r);
      measure_row(res.rows.back(), seconds, c);
      if (c.on_row) c.on_row(res.rows.back());
    }
  for (int round = 2; round <= rounds; ++round)
    for (TuneRow& r : res.rows) measure_row(r, seconds, c);
  gains(res.rows);
  if (std::optional<TuneRow> both = combined(res.rows, c.objective)) {
    res.rows.push_back(*both);
    // Against the recipe's figure that chose it: the table's gains stay those it was chosen by.
    for (int round = 1; round <= rounds; ++round) measure_row(res.rows.back(), seconds, c);
    if (c.on_row) c.on_row(res.rows.back());
    gains(res.rows);
  }
  for (size_t i = 0; i < res.rows.size(); ++i)
    if (res.rows[i].report && figure(*res.rows[i].report, c.objective) > figure(*res.rows[res.best].report, c.objective))
      res.best = i;
  res.best_command = tune_command(c.model.empty() ? c.base.model.name : c.model, c.args, res.rows[res.best].options);
  res.advice = advice_measured(res.rows);
  return res;
}

namespace {

std::string opt(const instrument::Opt& v, const char* f, double scale = 1) { return v ? printed(f, *v * scale) : "n/a"; }

std::string table_row(const TuneRow& r, bool cuda, size_t width) {
  std::string setting = r.setting + (r.advised ? " *" : "");
  if (!r.report) return printed("%-*s  skipped: %s\n", int(width), setting.c_str(), r.skipped.c_str());
  const instrument::EpochReport& m = *r.report;
  const double ms = m.steps > 0 ? 1e3 * m.train_seconds / double(m.steps) : 0;
  std::string line = printed("%-*s %11s %6.2fx %8.3f", int(width), setting.c_str(), instrument::thousands(m.samples_per_sec).c_str(),
                         r.gain, ms);
  if (cuda)
    line += printed(" %10s %6s %5s %5s", m.samples_per_joule ? instrument::thousands(*m.samples_per_joule).c_str() : "n/a",
                r.energy_gain ? printed("%.2fx", *r.energy_gain).c_str() : "n/a", opt(m.gpu_util_mean, "%.0f").c_str(),
                opt(m.gpu_sm_active, "%.0f").c_str());
  else
    line += printed(" %7d %6s", r.config.threads.value_or(0), opt(m.host_cpu_wait_share, "%.0f%%", 100).c_str());
  return line + "\n";
}

}  // namespace

std::string tune_table(const TuneResult& r) {
  size_t width = 8;
  for (const TuneRow& row : r.rows) width = std::max(width, row.setting.size() + 2);
  std::string out = printed("%-*s %11s %7s %8s", int(width), "setting", "samples/s", "gain", "ms/step");
  out += r.cuda ? printed(" %10s %6s %5s %5s\n", "samples/J", "gain", "util%", "SM%") : printed(" %7s %6s\n", "threads", "waited");
  for (const TuneRow& row : r.rows) out += table_row(row, r.cuda, width);
  out += "(* the recipe's advice named this change)\n";
  for (size_t i = 0; i < r.rows.size(); ++i)
    if (i != r.best && r.rows[i].kind != "batch" && !r.rows[i].note.empty())
      out += r.rows[i].setting + ": " + r.rows[i].note + "\n";
  const TuneRow& best = r.rows[r.best];
  const size_t rounds = r.rows[0].rounds.size();
  const double noise = round_spread(r.rows[0]);
  if (rounds > 1)
    out += printed("the recipe's %zu rounds differed by %.1f %%: gains within that are the machine's noise\n", rounds,
               100 * noise);
  const char* by = r.objective == TuneObjective::Speed ? "samples/s" : "samples/J";
  if (r.best == 0) {
    out += printed("best (%s): the recipe; no setting tried here beat it\n", by);
  } else {
    const double g = objective_gain(best, r.objective);
    out += printed("best (%s): %s, %.2fx the recipe's%s\n  %s\n", by, best.setting.c_str(), g,
               g - 1 < noise ? " (within the noise: more --rounds or --min-seconds)" : "", r.best_command.c_str());
    if (!best.note.empty()) out += "  " + best.note + "\n";
    if (std::find(best.options.begin(), best.options.end(), "--precision") != best.options.end())
      out += "  another precision rounds differently: check the accuracy (--target-acc)\n";
  }
  out += r.advice.empty() ? "the recipe's advice named no change tune tries\n" : "the recipe's advice:\n";
  for (const std::string& a : r.advice) out += "  " + a + "\n";
  return out;
}

}  // namespace loupe::run
