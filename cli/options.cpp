#include "cli/options.h"
#include "models/keras_json.h"
#include "models/registry.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "cli/cli_numbers.h"
#include "run/controls.h"
#include "run/profile.h"
#include "run/target.h"
#include "run/tune.h"
#include "train/lr_schedule.h"

namespace loupe::cli {

namespace {

// Every numeric option and the values it takes (cli/cli_numbers.h parses them; a value outside
// is refused before any data is loaded). The bounds are what the code can carry: counts that are
// narrowed to int, sizes that are multiplied into allocations, threads that are started.
constexpr int64_t kMaxSteps = 1000000000000;  // global step numbers (int64 counters)

int64_t in(const std::string& v, const char* flag, int64_t lo, int64_t hi) { return parse_int(v, flag, lo, hi); }
double above(const std::string& v, const char* flag, double lo, double hi) { return parse_double(v, flag, lo, hi); }

bool is_list_command(const std::string& c) { return c == "bench" || c == "sweep"; }

// --profile-steps A:B, 1 <= A <= B.
std::pair<int64_t, int64_t> profile_window(const std::string& ps) {
  size_t colon = ps.find(':');
  if (colon == std::string::npos)
    throw Error("--profile-steps needs A:B with 1 <= A <= B (global step numbers), got '" + ps + "'");
  int64_t a = parse_int(ps.substr(0, colon), "--profile-steps A", 1, kMaxSteps);
  return {a, parse_int(ps.substr(colon + 1), "--profile-steps B", a, kMaxSteps)};
}

using Setter = std::function<void(Options&, const std::string&)>;
struct Spec {
  bool flag;             // takes no value (--synthetic also takes one: --synthetic=KIND)
  const char* commands;  // the subcommands that take it, space-separated
  Setter set;
};

constexpr const char* kWhere = "train eval generate bench sweep peak roofline copybench profile tune";
constexpr const char* kBench = "bench sweep";

// Each option: whether it is a flag, who takes it, and how its value is parsed and stored.
const std::map<std::string, Spec> kSpecs = {
    {"device", {false, kWhere, [](Options& o, const std::string& v) {
       if (v.empty())  // it meant the default silently
         throw Error("--device needs cpu, cuda or cuda:N, got an empty value (leave --device out for the default)");
       o.device = v;
     }}},
    {"data", {false, "train eval generate profile tune", [](Options& o, const std::string& v) { o.data = v; }}},
    {"synthetic", {true, "train eval generate profile tune", [](Options& o, const std::string& v) {
       o.synthetic = true;
       if (v != "1") o.synthetic_kind = data::parse_synthetic_kind(v);
     }}},
    {"precision", {false, "train eval generate bench sweep profile tune", [](Options& o, const std::string& v) {
       if (!is_list_command(o.command)) {
         o.precision = {parse_precision(v)};
         return;
       }
       o.precision.clear();
       for (const std::string& p : parse_list(v)) o.precision.push_back(parse_precision(p));
     }}},
    {"graph", {false, "train eval bench sweep profile tune", [](Options& o, const std::string& v) { o.graph = train::parse_graph_mode(v); }}},
    {"threads", {false, "train bench sweep profile tune", [](Options& o, const std::string& v) { o.threads = int(in(v, "--threads", 1, 1024)); }}},
    {"seed", {false, "train generate bench sweep profile tune", [](Options& o, const std::string& v) { o.seed = uint64_t(in(v, "--seed", 0, INT64_MAX)); }}},
    {"checkpoint", {false, "eval generate", [](Options& o, const std::string& v) { o.checkpoint = v; }}},
    {"epochs", {false, "train bench", [](Options& o, const std::string& v) { o.epochs = int(in(v, "--epochs", 1, 1000000)); }}},
    {"batch", {false, "train copybench bench sweep profile tune", [](Options& o, const std::string& v) {
       if (is_list_command(o.command)) o.batch = parse_int_list(v, "--batch", 1, 1 << 20);
       else o.batch = {in(v, "--batch", 1, 1 << 20)};
     }}},
    {"lr", {false, "train profile tune", [](Options& o, const std::string& v) { o.lr = above(v, "--lr", 0, 1000); }}},
    {"optimizer", {false, "train profile tune", [](Options& o, const std::string& v) {
       models::with_optimizer(models::Recipe{}, v);  // an unknown name is refused here, before any work
       o.optimizer = v;
     }}},
    {"loss", {false, "train profile eval bench sweep tune", [](Options& o, const std::string& v) {
       models::check_loss_name(v);  // an unknown name is refused here, before any work
       o.loss = v;
     }}},
    {"max-steps", {false, "train", [](Options& o, const std::string& v) { o.max_steps = in(v, "--max-steps", 1, kMaxSteps); }}},
    {"target-acc", {false, "train", [](Options& o, const std::string& v) { o.target_acc = run::parse_target(v); }}},
    {"seeds", {false, "train", [](Options& o, const std::string& v) { o.seeds = int(in(v, "--seeds", 1, 1000)); }}},
    {"workers", {false, "train profile tune", [](Options& o, const std::string& v) { o.workers = int(in(v, "--workers", 1, 256)); }}},
    {"prefetch", {false, "train profile tune", [](Options& o, const std::string& v) { o.prefetch = int(in(v, "--prefetch", 1, 64)); }}},
    {"pin-memory", {false, "train profile tune", [](Options& o, const std::string& v) {
       if (v != "on" && v != "off") throw Error("--pin-memory takes on or off, got '" + v + "'");
       o.pin_memory = v == "on";
     }}},
    {"drop-last", {true, "train", [](Options& o, const std::string&) { o.drop_last = true; }}},
    {"resident", {true, "train profile tune", [](Options& o, const std::string&) { o.resident = true; }}},
    {"val-split", {false, "train eval profile tune", [](Options& o, const std::string& v) {
       o.val_split = above(v, "--val-split", 0, 0.9);
     }}},
    {"channels-last", {true, "train bench sweep profile tune", [](Options& o, const std::string&) { o.channels_last = true; }}},
    {"save", {false, "train", [](Options& o, const std::string& v) { o.save = v; }}},
    {"save-keras", {false, "train", [](Options& o, const std::string& v) {
       if (!models::is_keras_archive(v)) throw Error("--save-keras '" + v + "': Keras 3's model files end in .keras");
       o.save_keras = v;
     }}},
    {"save-best", {true, "train", [](Options& o, const std::string&) { o.save_best = true; }}},
    {"lr-schedule", {false, "train", [](Options& o, const std::string& v) {
       if (train::is_plateau(v)) train::parse_plateau(v);  // refused here, before any work
       else train::parse_lr_schedule(v, 1e-3);
       o.lr_schedule = v;
     }}},
    {"early-stop", {false, "train", [](Options& o, const std::string& v) {
       run::parse_early_stop(v);
       o.early_stop = v;
     }}},
    {"resume", {false, "train", [](Options& o, const std::string& v) { o.resume = v; }}},
    {"weights", {false, "train eval", [](Options& o, const std::string& v) { o.weights = v; }}},
    {"metrics", {false, "train tune", [](Options& o, const std::string& v) { o.metrics = v; }}},
    {"tensorboard", {false, "train", [](Options& o, const std::string& v) {
       if (v.empty()) throw Error("--tensorboard needs a directory for the event files, e.g. --tensorboard runs/mlp");
       o.tensorboard = v;
     }}},
    {"csv", {false, "train bench sweep roofline compare profile", [](Options& o, const std::string& v) { o.csv = v; }}},
    {"json", {false, "bench sweep profile", [](Options& o, const std::string& v) { o.json = v; }}},
    {"png", {false, "sweep roofline profile", [](Options& o, const std::string& v) { o.png = v; }}},
    {"trace", {false, "train", [](Options& o, const std::string& v) { o.trace = v; }}},
    {"timeline", {false, "train", [](Options& o, const std::string& v) { o.timeline = v; }}},
    {"sample-ms", {false, "train", [](Options& o, const std::string& v) { o.sample_ms = int(in(v, "--sample-ms", 1, 60000)); }}},
    {"labels", {false, "compare", [](Options& o, const std::string& v) { o.labels = parse_list(v); }}},
    {"plot", {false, "compare", [](Options& o, const std::string& v) { o.plot = v; }}},
    {"profile-steps", {false, "train profile", [](Options& o, const std::string& v) { o.profile_steps = profile_window(v); }}},
    {"price-per-hour", {false, "train bench sweep compare", [](Options& o, const std::string& v) {
       o.price_per_hour.clear();
       if (o.command != "compare") o.price_per_hour = {above(v, "--price-per-hour", 0, 1e6)};
       else for (const std::string& p : parse_list(v)) o.price_per_hour.push_back(above(p, "--price-per-hour", 0, 1e6));
     }}},
    {"counters", {true, "profile", [](Options& o, const std::string&) { o.counters = true; }}},
    {"predict", {false, "profile", [](Options& o, const std::string& v) { o.predict = run::known_gpu(v); }}},
    {"busy", {true, "train bench sweep", [](Options& o, const std::string&) { o.busy = true; }}},
    {"no-nvml", {true, "train bench sweep profile tune", [](Options& o, const std::string&) { o.nvml = false; }}},
    {"plain", {true, "train", [](Options& o, const std::string&) { o.plain = true; }}},
    {"gpus", {false, "train bench", [](Options& o, const std::string& v) {
       o.gpus.clear();
       if (o.command != "bench") o.gpus = {int(in(v, "--gpus", 1, 64))};
       else for (int64_t g : parse_int_list(v, "--gpus", 1, 64)) o.gpus.push_back(int(g));
     }}},
    {"nnodes", {false, "train", [](Options& o, const std::string& v) { o.nnodes = int(in(v, "--nnodes", 1, 4096)); }}},
    {"node-rank", {false, "train", [](Options& o, const std::string& v) { o.node_rank = int(in(v, "--node-rank", 0, 4095)); }}},
    {"master", {false, "train", [](Options& o, const std::string& v) { o.master = v; }}},
    {"baseline", {false, "train", [](Options& o, const std::string& v) { o.baseline = above(v, "--baseline", 0, 1e12); }}},
    {"prompt", {false, "generate", [](Options& o, const std::string& v) { o.prompt = v; }}},
    {"length", {false, "generate", [](Options& o, const std::string& v) { o.length = in(v, "--length", 1, 1000000); }}},
    {"temperature", {false, "generate", [](Options& o, const std::string& v) {
       o.temperature = above(v, "--temperature", 0, 1000);
     }}},
    {"steps", {false, kBench, [](Options& o, const std::string& v) { o.steps = in(v, "--steps", 1, 1000000); }}},
    {"warmup", {false, kBench, [](Options& o, const std::string& v) { o.warmup = in(v, "--warmup", 0, 1000000); }}},
    {"rounds", {false, "bench sweep tune", [](Options& o, const std::string& v) { o.rounds = int(in(v, "--rounds", 1, 1000)); }}},
    {"objective", {false, "tune", [](Options& o, const std::string& v) {
       run::parse_objective(v);
       o.objective = v;
     }}},
    {"recipe-only", {true, "tune", [](Options& o, const std::string&) { o.recipe_only = true; }}},
    {"min-seconds", {false, "bench sweep roofline tune", [](Options& o, const std::string& v) {
       o.min_seconds = above(v, "--min-seconds", 0, 3600);
     }}},
    {"sizes", {false, "roofline", [](Options& o, const std::string& v) {
       o.sizes = parse_int_list(v, "--sizes", 1, 65536);  // cli/roofline/roofline.cpp's bound
     }}},
};

const std::set<std::string> kCommands{"train",    "eval",      "generate", "bench",   "sweep", "models", "peak",
                                      "roofline", "copybench", "profile",  "compare", "tune",  "help"};

bool takes(const Spec& s, const std::string& command) {
  const std::string list = std::string(" ") + s.commands + " ";
  return list.find(" " + command + " ") != std::string::npos;
}

// One word of the command line that is not an option: the command, then the model. `after_dashes`:
// the word came after `--`, where a word that looks like an option is a positional all the same.
void positional(Options& o, const std::string& s, bool after_dashes = false) {
  if (o.command.empty()) o.command = s;
  else if (o.command == "compare") o.files.push_back(s);
  else if (o.model.empty()) o.model = s;
  else if (after_dashes)
    throw Error("unexpected argument '" + shown_value(s) + "': loupe " + o.command + " takes one model and it is '" +
                shown_value(o.model) + "' (every word after -- is a positional; options go before it)");
  else throw Error("unexpected argument '" + shown_value(s) + "' (see loupe --help)");
}

// Paths given as empty strings (--data "" used to mean the default silently), and outputs that
// name the same file (--save X --metrics X: the checkpoint's rename took the metrics' place).
void check_paths(const Options& o, const std::vector<std::pair<std::string, std::string>>& given) {
  static const std::set<std::string> kPaths{"data", "checkpoint", "save", "save-keras", "resume", "weights", "metrics", "tensorboard", "csv",
                                            "json", "png", "trace", "timeline"};
  for (const auto& [key, val] : given)
    if (kPaths.count(key) && val.empty()) throw Error("--" + key + " needs a path, got an empty one");
  const std::pair<const char*, const std::string*> outputs[] = {
      {"save", &o.save}, {"save-keras", &o.save_keras}, {"metrics", &o.metrics}, {"csv", &o.csv}, {"trace", &o.trace}, {"timeline", &o.timeline}};
  std::map<std::string, const char*> seen;
  for (const auto& [name, path] : outputs) {
    if (path->empty()) continue;
    std::error_code ec;
    const std::string key = std::filesystem::weakly_canonical(*path, ec).string();
    const auto [it, fresh] = seen.emplace(ec ? *path : key, name);
    if (!fresh)
      throw Error("--" + std::string(it->second) + " and --" + name + " name the same file '" + *path +
                  "': give each output a file of its own");
  }
}

}  // namespace

std::vector<std::string> options_of(const std::string& command) {
  std::vector<std::string> names;
  for (const auto& [name, spec] : kSpecs)
    if (takes(spec, command)) names.push_back(name);
  return names;
}

std::string nearest(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 3;
  for (const std::string& k : known) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(k.size() + 1);
    for (size_t j = 0; j <= k.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= k.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] == k[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    const size_t d = word.size() >= 2 && k.rfind(word, 0) == 0 ? 1 : row[k.size()];
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string unknown_command(const std::string& command) {
  std::vector<std::string> known(kCommands.begin(), kCommands.end());
  const std::string near = nearest(command, known);
  return "unknown command '" + command + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
         " (see loupe --help)";
}

namespace {
// An option no subcommand knows, with the nearest that this one takes (any, before the command).
std::string unknown_option(const std::string& key, const std::string& command) {
  std::vector<std::string> known;
  for (const auto& [name, spec] : kSpecs)
    if (command.empty() || !kCommands.count(command) || takes(spec, command)) known.push_back(name);
  const std::string near = nearest(key, known);
  return "unknown option --" + key + (near.empty() ? "" : "; did you mean --" + near + "?") + " (see loupe " +
         (command.empty() ? "" : command + " ") + "--help)";
}

// The short forms: the ecosystem's (PyTorch's examples: -b batch, -j workers) and -e.
const std::map<std::string, char> kShort{{"batch", 'b'}, {"epochs", 'e'}, {"workers", 'j'}};

// The command line as CLI11 gets it, and what loupe keeps for itself.
struct Words {
  std::vector<std::string> cli11;         // the words before `--`, for CLI11
  std::vector<std::string> after_dashes;  // the words after `--`: positionals, whatever they look like
  std::map<std::string, bool> with_equals;  // by option: whether its last value was given as --X=VALUE
};

// argv for CLI11, with two of loupe's conventions spelt its way: `--synthetic KIND` as
// `--synthetic=KIND` (a flag that may take a value), and `--X=` (an empty value, which CLI11
// reads as none) as `--X ""`, so that the empty path is refused by name. The first `--` ends the
// options, as in CLI11 and getopt: CLI11 never sees it or what follows (docs/cli.md, "Values").
Words cli11_words(int argc, char** argv) {
  Words words;
  std::vector<std::string>& w = words.cli11;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--") {
      words.after_dashes.assign(argv + i + 1, argv + argc);
      break;
    }
    if (s.size() > 2 && s.rfind("--", 0) == 0 && s[2] != '-')
      words.with_equals[s.substr(2, s.find('=') - 2)] = s.find('=') != std::string::npos;
    if (s == "--synthetic" && i + 1 < argc && (std::string(argv[i + 1]) == "random" || std::string(argv[i + 1]) == "learnable")) {
      w.push_back(s + "=" + argv[++i]);
    } else if (s.size() > 3 && s.rfind("--", 0) == 0 && s.back() == '=') {
      w.push_back(s.substr(0, s.size() - 1));
      w.emplace_back();
    } else {
      w.push_back(s);
    }
  }
  return words;
}

// Every option on the named subcommand, so that CLI11 reads each as a flag or as taking a value
// wherever it stands; which options the subcommand takes is loupe's check after the parse (one that
// another subcommand takes is refused by name, not as unknown).
struct Parsed {
  std::map<std::string, std::pair<CLI::Option*, std::string>> options;  // by name: CLI11's, its value
  std::vector<std::string> words;                                      // the subcommand's positionals
};

void declare(CLI::App& sub, Parsed& p) {
  sub.fallthrough();  // -h and -V after the subcommand reach the app's flags
  sub.allow_extras();
  sub.set_help_flag();
  sub.add_option("words", p.words);
  for (const auto& [name, spec] : kSpecs) {
    auto& [opt, value] = p.options[name];
    std::string names = "--" + name;
    if (auto sh = kShort.find(name); sh != kShort.end()) names = std::string("-") + sh->second + "," + names;
    if (name == "synthetic") opt = sub.add_flag(names + "{1}", value);  // --synthetic[=KIND]
    else if (spec.flag) opt = sub.add_flag(names);
    else opt = sub.add_option(names, value);
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last of a repeated option wins
  }
}

// "--epochs: 1 required TEXT missing" -> "epochs".
std::string option_in(const std::string& message) {
  const size_t at = message.find("--");
  if (at == std::string::npos) return "";
  size_t end = at + 2;
  while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-')) ++end;
  return message.substr(at + 2, end - at - 2);
}

// A value that is itself an option: `--save --metrics` gave --save the value "--metrics" (CLI11 takes
// the next word whatever it is); `--save=--metrics` says it is meant. A negative number has one dash.
void check_values(const std::vector<std::pair<std::string, std::string>>& given, const Words& words) {
  for (const auto& [key, val] : given) {
    if (kSpecs.at(key).flag || val.rfind("--", 0) != 0) continue;
    const auto eq = words.with_equals.find(key);
    if (eq != words.with_equals.end() && eq->second) continue;
    const std::string v = shown_value(val);
    throw UsageError("--" + key + " needs a value, got the option '" + v +
                     "'; a path that starts with -- is written --" + key + "=" + v + " or ./" + v);
  }
}

// The command line parsed by CLI11 into (option, value) pairs in kSpecs' order and the positionals.
std::vector<std::pair<std::string, std::string>> parse_cli11(Options& o, const Words& all) {
  const std::vector<std::string>& words = all.cli11;
  if (!words.empty() && words[0] == "help") {  // `loupe help COMMAND`: the COMMAND is a word, not a subcommand
    for (const std::string& w : words) positional(o, w);
    for (const std::string& w : all.after_dashes) positional(o, w, true);
    return {};
  }
  // Options before the command (`loupe --device cpu train mnist_mlp`) are the command's: CLI11 reads
  // a subcommand's options after it, so the command goes first. Only that subcommand is declared;
  // a word that is no command stays a positional, for main's "unknown command".
  std::vector<std::string> ordered = words;
  const auto cmd = std::find_if(ordered.begin(), ordered.end(), [](const std::string& w) { return kCommands.count(w) > 0; });
  const std::string command = cmd == ordered.end() ? "" : *cmd;
  if (cmd != ordered.end()) std::rotate(ordered.begin(), cmd, cmd + 1);
  CLI::App app{"loupe"};
  app.set_help_flag();
  app.allow_extras();
  app.add_flag("-h,--help", o.help);
  app.add_flag("-V,--version", o.version);
  Parsed parsed;
  CLI::App* sub = command.empty() ? nullptr : app.add_subcommand(command);
  if (sub) declare(*sub, parsed);
  std::vector<std::string> reversed(ordered.rbegin(), ordered.rend());  // CLI11 takes the words last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {  // a missing value; CLI11's other refusals, in its words
    const std::string name = option_in(e.what());
    const std::string see = " (see loupe " + (command.empty() ? "" : command + " ") + "--help)";
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && !name.empty())
      throw UsageError("option --" + name + " needs a value" + see);
    throw UsageError(std::string(e.what()) + see);
  }
  for (const std::string& extra : app.remaining(true)) {
    if (extra.rfind("-", 0) == 0 && extra.size() > 1) {  // an option CLI11 did not know
      const size_t from = extra.find_first_not_of('-');
      const std::string key = from == std::string::npos ? extra : extra.substr(from, extra.find('=') - from);
      throw UsageError(unknown_option(shown_value(key), command));
    }
    positional(o, extra);  // the command CLI11 did not know ("unknown command", main says)
  }
  std::vector<std::pair<std::string, std::string>> given;
  if (sub) {
    o.command = command;
    for (const auto& [name, opt] : parsed.options)
      if (opt.first->count() > 0)
        given.emplace_back(name, kSpecs.at(name).flag && name != "synthetic" ? "1" : opt.second);
    if (!o.help && !o.version) check_values(given, all);  // before the positionals: a value taken is one fewer
  }
  for (const std::string& w : parsed.words) positional(o, w);
  for (const std::string& w : all.after_dashes) positional(o, w, true);
  return given;
}

Options parse_words(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) o.args.push_back(argv[i]);
  const Words words = cli11_words(argc, argv);
  const std::vector<std::pair<std::string, std::string>> given = parse_cli11(o, words);
  if (o.help || o.version || !kCommands.count(o.command)) return o;  // the usage, or "unknown command"
  for (const auto& [key, val] : given) {
    const Spec& spec = kSpecs.at(key);
    if (!takes(spec, o.command))
      throw UsageError("loupe " + o.command + " does not take --" + key + " (see loupe " + o.command + " --help)");
    spec.set(o, val);
    o.given.insert(key);
  }
  check_paths(o, given);
  if (!o.trace.empty() && !o.has("profile-steps")) o.profile_steps = profile_window("10:19");
  if (o.save_best && o.save.empty())
    throw Error("--save-best keeps the best epoch in --save's file: give --save PATH too");
  if (o.has("seeds") && !o.target_acc)
    throw Error("--seeds repeats a run to a target accuracy over seeds: give --target-acc A too");
  if (o.target_acc && (o.gpu_count() > 1 || o.nnodes > 1))
    throw Error("--target-acc times one process's run; a data-parallel run (--gpus, --nnodes) is not timed to a target yet");
  if (o.seeds > 1 && (!o.save.empty() || !o.resume.empty() || !o.save_keras.empty()))
    throw Error("--seeds " + std::to_string(o.seeds) + " makes " + std::to_string(o.seeds) +
                " runs: --save, --save-keras and --resume name one run's files");
  if (o.node_rank >= o.nnodes)
    throw Error("--node-rank " + std::to_string(o.node_rank) + " is outside --nnodes " + std::to_string(o.nnodes) +
                ": hosts are numbered from 0");
  return o;
}
}  // namespace

Options parse_options(int argc, char** argv) {
  try {
    return parse_words(argc, argv);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a value the option cannot take (a range, a choice, a path)
    throw UsageError(e.what());
  }
}

}  // namespace loupe::cli
