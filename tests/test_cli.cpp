// The command's help and version (issue 17, point 11): every subcommand has its own --help naming
// every option it takes, `loupe --version` says the version and the build, and an option is
// refused by name where the subcommand does not take it, also as the last word.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// A build without protobuf refuses --tensorboard in one sentence that names the packages, before any
// data is loaded (--data names no directory); test_tensorboard covers the builds that have it.
TEST(Cli, TensorBoardRefusedWhereNotBuilt) {
  if (loupe::instrument::tensorboard_available()) LOUPE_SKIP_NOT_HERE << "this build writes TensorBoard files";
  auto [rc, out] = run_cli("train mnist_mlp --device cpu --plain --no-nvml --data /nonexistent/loupe --tensorboard tb");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(out, "loupe: " + loupe::instrument::tensorboard_missing() + "\n");
  EXPECT_NE(out.find("libprotobuf-dev, protobuf-compiler and libboost-dev"), std::string::npos) << out;
}
