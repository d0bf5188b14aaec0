// The command's help and version (docs/cli.md): every subcommand has its own --help naming
// every option it takes, `loupe --version` says the version and the build, and an option is
// refused by name where the subcommand does not take it, also as the last word.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "instrument/report_io.h"
#include "instrument/tensorboard.h"
#include "ops/conv_cpu.h"
#include "test_util.h"
#include "cli/options.h"
#include "skip.h"

namespace {

const char* const kCommands[] = {"train", "eval", "generate", "bench", "sweep", "roofline", "models", "peak", "copybench",
                                 "profile", "compare"};

// `loupe ARGS`, stdout and stderr together: {exit status, output}.
std::pair<int, std::string> run_cli(const std::string& args) {
  return loupe::test::run_command(std::string(LOUPE_CLI) + " " + args);
}

// `loupe ARGS`, its stderr only (stdout dropped): {exit status, stderr}.
std::pair<int, std::string> run_cli_stderr(const std::string& args) {
  return loupe::test::run_command("{ " + std::string(LOUPE_CLI) + " " + args + " 2>&1 >/dev/null; }");
}

}  // namespace

// Each subcommand's usage starts with its own line and names every option the parser lets it take
// (a new option without a line in the help fails here).
TEST(Cli, EveryCommandsHelpNamesEveryOptionItTakes) {
  const std::string global = loupe::cli::kUsage;
  for (const std::string c : kCommands) {
    const std::string help = loupe::cli::usage(c);
    EXPECT_EQ(help.rfind("usage: loupe " + c, 0), 0u) << c << ":\n" << help;
    EXPECT_NE(global.find("loupe " + c), std::string::npos) << "loupe --help does not list " << c;
    for (const std::string& option : loupe::cli::options_of(c))
      EXPECT_NE(help.find("--" + option), std::string::npos) << "loupe " << c << " --help does not name --" << option;
  }
  EXPECT_TRUE(loupe::cli::options_of("models").empty());
}

TEST(Cli, EveryCommandHasItsOwnHelp) {
  for (const std::string c : kCommands) {
    for (const std::string& args : {c + " --help", c + " -h", "help " + c, c + " mnist_mlp --device cpu --help"}) {
      auto [rc, out] = run_cli(args);
      EXPECT_EQ(rc, 0) << args << "\n" << out;
      EXPECT_EQ(out, loupe::cli::usage(c)) << args;
    }
  }
  auto [rc, out] = run_cli("--help");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, loupe::cli::kUsage);
  std::tie(rc, out) = run_cli_stderr("");
  EXPECT_EQ(rc, 2);  // no command: a usage error, its usage on stderr (and nothing on stdout)
  EXPECT_EQ(out, loupe::cli::kUsage);
  std::tie(rc, out) = run_cli("");
  EXPECT_EQ(out, loupe::cli::kUsage);
  // An unknown command: a usage error (status 2, stderr) naming the nearest command.
  for (const char* args : {"trian --help", "help trian", "trian mnist_mlp"}) {
    std::tie(rc, out) = run_cli_stderr(args);
    EXPECT_EQ(rc, 2) << args;
    EXPECT_EQ(out, "loupe: unknown command 'trian'; did you mean 'train'? (see loupe --help)\n") << args;
  }
  std::tie(rc, out) = run_cli("xyzzy");
  EXPECT_EQ(out, "loupe: unknown command 'xyzzy' (see loupe --help)\n");  // nothing near it
}

// The ecosystem's manners: `--synthetic KIND` as `--synthetic=KIND`, short forms, and the nearest
// option for a misspelt one.
TEST(Cli, ConventionsOfTheEcosystem) {
  auto [rc, out] = run_cli("train mnist_mlp --device cpu --plain --no-nvml --synthetic learnable -e 1 -b 64 -j 2 "
                           "--max-steps 1");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("data    synthetic learnable"), std::string::npos) << out;
  EXPECT_NE(out.find("2 workers"), std::string::npos) << out;
  EXPECT_NE(out.find("batch 64, epochs 1"), std::string::npos) << out;
  // Options before the command are the command's, as the hand-written parser took them.
  std::tie(rc, out) = run_cli("--device cpu --plain --no-nvml train mnist_mlp --synthetic -e 1 --max-steps 1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("device  cpu"), std::string::npos) << out;
  std::tie(rc, out) = run_cli_stderr("train mnist_mlp --device cpu --epoch 3");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "loupe: unknown option --epoch; did you mean --epochs? (see loupe train --help)\n");
  std::tie(rc, out) = run_cli("train mnist_mlp --synthetic bogus");  // not a kind: the model's name came first
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "loupe: unexpected argument 'bogus' (see loupe --help)\n");
}

TEST(Cli, VersionSaysTheVersionAndTheBuild) {
  for (const char* args : {"--version", "-V", "train --version"}) {
    auto [rc, out] = run_cli(args);
    EXPECT_EQ(rc, 0) << args << "\n" << out;
    EXPECT_EQ(out.rfind(std::string("loupe ") + LOUPE_VERSION + "\n", 0), 0u) << args << "\n" << out;
    std::string cuda = LOUPE_BUILD_CUDA;
    EXPECT_NE(out.find(cuda.empty() ? "\nCUDA: off (a CPU-only build)\n" : "\nCUDA: on (" + cuda + ")"), std::string::npos)
        << out;
    if (std::string cudnn = LOUPE_BUILD_CUDNN; !cudnn.empty()) EXPECT_NE(out.find(", cuDNN " + cudnn), std::string::npos) << out;
    EXPECT_TRUE(out.find("\nCPU GEMM: OpenBLAS\n") != std::string::npos ||
                out.find("\nCPU GEMM: oneDNN (float32), OpenBLAS (float64)\n") != std::string::npos ||
                out.find("\nCPU GEMM: builtin\n") != std::string::npos) << out;
    const std::string dnnl = loupe::cpu::dnnl_version();
    EXPECT_NE(out.find(dnnl.empty() ? "\noneDNN: off (" : "\noneDNN: on (" + dnnl + ")\n"), std::string::npos) << out;
    EXPECT_NE(out.find(loupe::instrument::tensorboard_available() ? "\nTensorBoard: on\n" : "\nTensorBoard: off ("),
              std::string::npos) << out;
    // The build tree's command reads the sources' scripts.
    EXPECT_NE(out.find(std::string("\nplot scripts: ") + LOUPE_TOOLS_DIR + "\n"), std::string::npos) << out;
  }
}

// An unknown option is "unknown" wherever it stands, also last (where it once "needed a value"); one
// the subcommand does not take is refused by name, for every subcommand; nothing is run.
TEST(Cli, OptionsAreCheckedPerSubcommand) {
  const std::pair<std::string, std::string> cases[] = {
      {"eval mnist_mlp --checkpoint /nonexistent/loupe.ckpt --bogus", "unknown option --bogus (see loupe eval --help)"},
      {"roofline --device cpu --sizes 8 --bogus", "unknown option --bogus (see loupe roofline --help)"},
      {"sweep mnist_mlp --batch 8 --bogus=3", "unknown option --bogus (see loupe sweep --help)"},
      {"train mnist_mlp --synthetic --no-such-flag", "unknown option --no-such-flag (see loupe train --help)"},
      {"train mnist_mlp --synthetic --epoch 3", "unknown option --epoch; did you mean --epochs? (see loupe train --help)"},
      {"models --device cpu", "loupe models does not take --device (see loupe models --help)"},
      {"sweep mnist_mlp --batch 8 --epochs 3", "loupe sweep does not take --epochs (see loupe sweep --help)"},
      {"roofline --batch 8", "loupe roofline does not take --batch (see loupe roofline --help)"},
      {"generate char_lstm --checkpoint /nonexistent/loupe.ckpt --graph off",
       "loupe generate does not take --graph (see loupe generate --help)"},
      {"peak --png out.png", "loupe peak does not take --png (see loupe peak --help)"},
      {"copybench --steps 3", "loupe copybench does not take --steps (see loupe copybench --help)"},
      {"bench mnist_mlp --device cpu --plain", "loupe bench does not take --plain (see loupe bench --help)"},
      {"train mnist_mlp --synthetic --sizes 8", "loupe train does not take --sizes (see loupe train --help)"},
      {"eval mnist_mlp --checkpoint", "option --checkpoint needs a value (see loupe eval --help)"},
      // (from test_train's twin of this test, merged here)
      {"eval mnist_mlp --checkpoint /nonexistent/loupe.ckpt --epochs 3",
       "loupe eval does not take --epochs (see loupe eval --help)"},
      {"bench mnist_mlp --device cpu --prompt hello", "loupe bench does not take --prompt (see loupe bench --help)"},
      {"train mnist_mlp --device cpu --bogus 3", "unknown option --bogus (see loupe train --help)"},
      {"train mnist_mlp --device cpu --epochs", "option --epochs needs a value (see loupe train --help)"},
      // Paths: an empty one (it used to mean the default silently), and two outputs in one file.
      {"train mnist_mlp --device cpu --data ''", "--data needs a path, got an empty one"},
      {"eval mnist_mlp --checkpoint=", "--checkpoint needs a path, got an empty one"},
      {"train mnist_mlp --device cpu --save /tmp/loupe_same.out --metrics /tmp/loupe_same.out",
       "--save and --metrics name the same file '/tmp/loupe_same.out': give each output a file of its own"},
      {"train mnist_mlp --device cpu --csv /tmp/./loupe_same.csv --timeline /tmp/loupe_same.csv",
       "--csv and --timeline name the same file '/tmp/loupe_same.csv': give each output a file of its own"},
  };
  for (const auto& [args, message] : cases) {
    auto [rc, out] = run_cli_stderr(args);  // a usage error: status 2, on stderr
    EXPECT_EQ(rc, 2) << args << "\n" << out;
    EXPECT_EQ(out, "loupe: " + message + "\n") << args;
  }
}

namespace {

// `loupe WORDS...` through the parser.
loupe::cli::Options parse(std::vector<std::string> words) {
  words.insert(words.begin(), "loupe");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return loupe::cli::parse_options(int(argv.size()), argv.data());
}

// The parser's verdict on `loupe WORDS...`: "" when it takes them, else its message.
std::string parse_refusal(const std::vector<std::string>& words) {
  try {
    parse(words);
  } catch (const loupe::cli::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Hosts are numbered from 0: --node-rank must be below --nnodes (the last host is nnodes - 1), a
// usage error before any work; the accepted values reach the options.
TEST(Cli, NodeRankIsBelowNnodes) {
  const std::vector<std::string> train = {"train", "mnist_mlp", "--device", "cpu"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), train.begin(), train.end());
    return more;
  };
  EXPECT_EQ(parse_refusal(with({"--nnodes", "2", "--node-rank", "2"})),
            "--node-rank 2 is outside --nnodes 2: hosts are numbered from 0");
  EXPECT_EQ(parse_refusal(with({"--node-rank", "1"})), "--node-rank 1 is outside --nnodes 1: hosts are numbered from 0");
  EXPECT_EQ(parse_refusal(with({"--nnodes", "2", "--node-rank", "1"})), "");
  const loupe::cli::Options o = parse(with({"--nnodes", "3", "--node-rank", "2"}));
  EXPECT_EQ(o.nnodes, 3);
  EXPECT_EQ(o.node_rank, 2);
}

// --target-acc is a fraction (91 is told its fraction); --seeds needs it and refuses one run's
// files; a data-parallel run is not timed to a target; the accepted values reach the options.
TEST(Cli, TargetAccuracyAndSeedsAreChecked) {
  const std::vector<std::string> train = {"train", "mnist_mlp", "--device", "cpu"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), train.begin(), train.end());
    return more;
  };
  EXPECT_EQ(parse_refusal(with({"--target-acc", "91"})), "--target-acc is a fraction of the test samples: 91 % is --target-acc 0.91");
  for (const char* bad : {"0", "101", "-0.5", "nan", "0.9x", ""})
    EXPECT_EQ(parse_refusal(with({"--target-acc", bad})),
              "--target-acc must be a fraction above 0 and at most 1 (0.91: 91 %), got '" + std::string(bad) + "'");
  EXPECT_EQ(parse_refusal(with({"--seeds", "3"})), "--seeds repeats a run to a target accuracy over seeds: give --target-acc A too");
  EXPECT_EQ(parse_refusal(with({"--target-acc", "0.9", "--seeds", "2", "--save", "m.ckpt"})),
            "--seeds 2 makes 2 runs: --save, --save-keras and --resume name one run's files");
  EXPECT_NE(parse_refusal(with({"--target-acc", "0.9", "--nnodes", "2"})).find("a data-parallel run (--gpus, --nnodes) is not timed"),
            std::string::npos);
  const loupe::cli::Options o = parse(with({"--target-acc", "0.91", "--seeds", "5"}));
  EXPECT_DOUBLE_EQ(*o.target_acc, 0.91);
  EXPECT_EQ(o.seeds, 5);
}

// A build without protobuf refuses --tensorboard in one sentence that names the packages, before any
// data is loaded (--data names no directory); test_tensorboard covers the builds that have it.
TEST(Cli, TensorBoardRefusedWhereNotBuilt) {
  if (loupe::instrument::tensorboard_available()) LOUPE_SKIP_NOT_HERE << "this build writes TensorBoard files";
  auto [rc, out] = run_cli("train mnist_mlp --device cpu --plain --no-nvml --data /nonexistent/loupe --tensorboard tb");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(out, "loupe: " + loupe::instrument::tensorboard_missing() + "\n");
  EXPECT_NE(out.find("libprotobuf-dev, protobuf-compiler and libboost-dev"), std::string::npos) << out;
}

// An option's value that is itself an option is refused by name: `--save --metrics` used to save
// into a file named "--metrics" (docs/cli.md, "Values"). `--save=--metrics` says it is meant; a
// negative number is a value, and keeps its range's message.
TEST(Cli, AValueThatLooksLikeAnOptionIsRefused) {
  const std::vector<std::string> train = {"train", "mnist_mlp", "--device", "cpu"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), train.begin(), train.end());
    return more;
  };
  EXPECT_EQ(parse_refusal(with({"--save", "--metrics", "m.jsonl"})),
            "--save needs a value, got the option '--metrics'; a path that starts with -- is written "
            "--save=--metrics or ./--metrics");
  EXPECT_EQ(parse_refusal({"train", "mnist_mlp", "--device", "--synthetic"}),
            "--device needs a value, got the option '--synthetic'; a path that starts with -- is written "
            "--device=--synthetic or ./--synthetic");
  EXPECT_EQ(parse_refusal({"compare", "a.jsonl", "--labels", "--csv", "x.csv"}).rfind("--labels needs a value, got "
                                                                                     "the option '--csv'", 0), 0u);
  EXPECT_EQ(parse_refusal({"generate", "char_lstm", "--checkpoint", "c", "--prompt", "--length"}).rfind(
                "--prompt needs a value, got the option '--length'", 0), 0u);
  // A long value is echoed as a short prefix.
  const std::string refusal = parse_refusal(with({"--metrics", "--" + std::string(5000, 'x')}));
  EXPECT_EQ(refusal.rfind("--metrics needs a value, got the option '--xxxx", 0), 0u) << refusal;
  EXPECT_LT(refusal.size(), 300u);
  EXPECT_EQ(parse(with({"--save=--metrics"})).save, "--metrics");
  EXPECT_EQ(parse(with({"--save", "./--metrics"})).save, "./--metrics");
  EXPECT_EQ(parse_refusal(with({"--lr", "-1"})), "--lr must be a finite number above 0 and at most 1000, got '-1'");
}

// Numbers are decimal: strtod's hexadecimal ("0x10" was 16), infinity, NaN and overflow are
// refused with the option named; an empty --device (it meant the default) too.
TEST(Cli, NumbersAreDecimalOnly) {
  auto refusal = [&](const std::string& option, const std::string& value) {
    return parse_refusal({"train", "mnist_mlp", "--device", "cpu", option, value});
  };
  for (const char* v : {"0x10", "0X1p-3", "0x.8", "inf", "INFINITY", "nan", "1e400", "1e-400", "1,5", "1e", ".", "+1",
                        "1_0", "0b1"})
    EXPECT_EQ(refusal("--lr", v), "--lr must be a finite number above 0 and at most 1000, got '" + std::string(v) + "'")
        << v;
  EXPECT_EQ(refusal("--val-split", "0x.8p0"),
            "--val-split must be a finite number above 0 and at most 0.9, got '0x.8p0'");
  EXPECT_EQ(refusal("--epochs", "0x10"), "--epochs must be an integer from 1 to 1000000, got '0x10'");
  const std::string long_value = refusal("--lr", "0x" + std::string(5000, '1'));
  EXPECT_EQ(long_value.rfind("--lr must be a finite number above 0 and at most 1000, got '0x111", 0), 0u) << long_value;
  EXPECT_LT(long_value.size(), 200u);
  for (const char* v : {"0.001", "1e-3", "1E-3", ".5", "2.", "5", "1e+2", "0.5e1"})
    EXPECT_EQ(refusal("--lr", v), "") << v;
  EXPECT_DOUBLE_EQ(*parse({"train", "mnist_mlp", "--lr", "1e-3"}).lr, 1e-3);
  EXPECT_DOUBLE_EQ(*parse({"train", "mnist_mlp", "--lr", "10"}).lr, 10);
  EXPECT_EQ(parse_refusal({"train", "mnist_mlp", "--device", ""}),
            "--device needs cpu, cuda or cuda:N, got an empty value (leave --device out for the default)");
  EXPECT_EQ(parse_refusal({"train", "mnist_mlp", "--device="}),
            "--device needs cpu, cuda or cuda:N, got an empty value (leave --device out for the default)");
}

// `--` ends the options, as in CLI11 and getopt: every word after it is a positional, the first the
// model; a second one is refused by name. It used to end in std::string's out-of-range message.
TEST(Cli, DoubleDashEndsTheOptions) {
  loupe::cli::Options o = parse({"train", "--device", "cpu", "--", "mnist_mlp"});
  EXPECT_EQ(o.command, "train");
  EXPECT_EQ(o.model, "mnist_mlp");
  EXPECT_EQ(o.device, "cpu");
  o = parse({"train", "--", "--odd-name.json"});
  EXPECT_EQ(o.model, "--odd-name.json");
  EXPECT_FALSE(o.has("epochs"));
  EXPECT_EQ(parse({"compare", "--csv", "t.csv", "--", "--a.jsonl", "-b.jsonl"}).files,
            (std::vector<std::string>{"--a.jsonl", "-b.jsonl"}));
  EXPECT_EQ(parse_refusal({"train", "--", "--epochs", "2"}),
            "unexpected argument '2': loupe train takes one model and it is '--epochs' (every word after -- is a "
            "positional; options go before it)");
  EXPECT_EQ(parse_refusal({"train", "mnist_mlp", "--", "x"}),
            "unexpected argument 'x': loupe train takes one model and it is 'mnist_mlp' (every word after -- is a "
            "positional; options go before it)");
  for (const char* args : {"train -- mnist_mlp --device cpu", "train -- --epochs 2", "train --- x"}) {
    auto [rc, out] = run_cli_stderr(args);
    EXPECT_EQ(rc, 2) << args << "\n" << out;
    EXPECT_EQ(out.find("basic_string"), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(out.find("did you mean --epochs?"), std::string::npos) << args << "\n" << out;
  }
}

// A Slurm task given --device cpu is told which variables made it a rank: srun's, not WORLD_SIZE,
// which is not set.
TEST(Cli, ARankOnTheCpuIsToldWhichVariablesMadeItOne) {
  const std::string env = "env -u WORLD_SIZE -u RANK -u MASTER_PORT SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 ";
  auto [rc, out] = loupe::test::run_command(env + LOUPE_CLI + " train mnist_mlp --device cpu --synthetic");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, "loupe: a data-parallel rank (SLURM_PROCID=1 and SLURM_STEP_NUM_TASKS=2 are set) trains on a "
                 "GPU, not --device cpu\n");
  std::tie(rc, out) = loupe::test::run_command("env WORLD_SIZE=2 RANK=1 " + std::string(LOUPE_CLI) +
                                               " train mnist_mlp --device cpu --synthetic");
  EXPECT_EQ(out, "loupe: a data-parallel rank (WORLD_SIZE=2 is set) trains on a GPU, not --device cpu\n");
}

// Ctrl-C (or SIGTERM) during `loupe bench` stops it within about a second, 130 (143), and keeps every
// finished row: --json whole JSON Lines, --csv its header and the rows, both as the table printed
// them (run/bench.h's BenchFiles). It had no handler, and wrote both files only at the end.
TEST(Cli, BenchStoppedBySignalKeepsTheFinishedRows) {
  namespace fs = std::filesystem;
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path json = loupe::test::temp_path("loupe_bench_sig.jsonl");
    const fs::path csv = loupe::test::temp_path("loupe_bench_sig.csv");
    fs::remove(json);
    fs::remove(csv);
    // batch 8's row takes about a second here, batch 512's many: the signal lands in the second.
    loupe::test::CliChild run(std::string(LOUPE_CLI) + " bench mnist_mlp --device cpu --batch 8,512 --steps 200 "
                              "--warmup 1 --json " + json.string() + " --csv " + csv.string());
    ASSERT_TRUE(run.wait_for("\nmnist_mlp ", 120)) << run.text;  // the first row, printed as it finished
    const double t0 = loupe::test::CliChild::now();
    kill(run.pid, sig);
    int status = 0;
    while (loupe::test::CliChild::now() < t0 + 10 && waitpid(run.pid, &status, WNOHANG) != run.pid)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const double took = loupe::test::CliChild::now() - t0;
    run.pid = -1;
    run.drain();
    ASSERT_TRUE(WIFEXITED(status)) << run.text;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << run.text;
    EXPECT_LT(took, 2.0) << run.text;
    EXPECT_NE(run.text.find("loupe: interrupted; 1 finished row written to " + json.string() + " and " + csv.string() +
                            "\n"), std::string::npos) << run.text;
    const std::string lines = loupe::test::slurp(json);
    ASSERT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << lines;
    const nlohmann::json record = nlohmann::json::parse(lines);  // throws where it is not whole JSON
    EXPECT_EQ(record.at("batch"), 8) << lines;
    EXPECT_EQ(record.at("model"), "mnist_mlp") << lines;
    const std::string table = loupe::test::slurp(csv);
    ASSERT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << table;
    EXPECT_EQ(table.rfind("run_id,", 0), 0u) << table;
    const std::string header = table.substr(0, table.find('\n')), row = table.substr(header.size() + 1);
    EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ',')) << table;
    EXPECT_NE(row.find(",mnist_mlp,cpu,CPU,fp32,8,"), std::string::npos) << table;
    EXPECT_FALSE(fs::exists(json.string() + ".tmp"));
    fs::remove(json);
    fs::remove(csv);
  }
}

// tune measures each row in a loupe process of its own (docs/performance.md, "Tuning a run"): every
// row's record carries another process's run id, and --metrics holds one record per row, in the
// table's order, which the reader gives back whole.
TEST(Cli, TuneMeasuresEachRowInAProcessOfItsOwn) {
  namespace fs = std::filesystem;
  const fs::path metrics = loupe::test::temp_path("loupe_tune.jsonl");
  fs::remove(metrics);
  auto [rc, out] = run_cli("tune mnist_mlp --synthetic --device cpu --threads 1 --workers 1 --min-seconds 0.05 "
                           "--rounds 1 --metrics " + metrics.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\nrecipe "), std::string::npos) << out;
  EXPECT_NE(out.find("\nbest (samples/s): "), std::string::npos) << out;
  std::istringstream lines(loupe::test::slurp(metrics));
  std::vector<loupe::instrument::EpochReport> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(loupe::instrument::report_from_json(line));
  ASSERT_GE(rows.size(), 5u) << out;
  std::vector<std::string> ids;
  for (const auto& r : rows) {
    EXPECT_EQ(r.model, "mnist_mlp");
    EXPECT_GT(r.samples_per_sec, 0);
    ids.push_back(r.run_id);
  }
  EXPECT_EQ(rows[0].batch, 128);  // the recipe's row first
  EXPECT_EQ(rows[0].threads, 1);  // at the count the user named
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "two rows measured in one process";
  fs::remove(metrics);

  // --recipe-only: the one row each of those processes measured, here.
  auto [rc1, out1] = run_cli("tune mnist_mlp --synthetic --device cpu --threads 1 --min-seconds 0.05 --recipe-only "
                             "--batch 64 --metrics " + metrics.string());
  ASSERT_EQ(rc1, 0) << out1;
  const std::string one = loupe::test::slurp(metrics);
  ASSERT_EQ(std::count(one.begin(), one.end(), '\n'), 1) << one;
  EXPECT_EQ(loupe::instrument::report_from_json(one.substr(0, one.size() - 1)).batch, 64);
  EXPECT_NE(out1.find("best (samples/s): the recipe"), std::string::npos) << out1;
  fs::remove(metrics);
}

// A signal to tune alone (not its process group) ends it and the row's process it waits for.
TEST(Cli, TuneStoppedBySignalLeavesNoRowRunning) {
  namespace fs = std::filesystem;
  const fs::path tmp = loupe::test::temp_path("tune_tmp");
  fs::create_directories(tmp);
  loupe::test::CliChild run(std::string(LOUPE_CLI) + " tune mnist_mlp --synthetic --device cpu --threads 1 --min-seconds 30",
                            "env TMPDIR=" + tmp.string() + " ");
  // The first row's process has made its files in TMPDIR.
  const double t0 = loupe::test::CliChild::now();
  while (loupe::test::CliChild::now() < t0 + 60 && std::distance(fs::directory_iterator(tmp), fs::directory_iterator{}) < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator{}), 2);
  kill(run.pid, SIGINT);
  int status = 0;
  const double t1 = loupe::test::CliChild::now();
  while (loupe::test::CliChild::now() < t1 + 10 && waitpid(run.pid, &status, WNOHANG) != run.pid)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  run.pid = -1;
  run.drain();
  EXPECT_LT(loupe::test::CliChild::now() - t1, 3.0) << run.text;
  ASSERT_TRUE(WIFEXITED(status)) << run.text;
  EXPECT_EQ(WEXITSTATUS(status), 130) << run.text;
  // No process holds the row's files open: pgrep finds no command line naming them.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto [rc, out] = loupe::test::run_command("pgrep -f '" + tmp.string() + "/[l]oupe-tune-row'");  // [l]: not this shell
  EXPECT_EQ(rc, 1) << "a row's process outlived tune: " << out;
  fs::remove_all(tmp);
}
