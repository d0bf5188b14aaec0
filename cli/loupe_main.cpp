// The `loupe` command: parses the command line once (cli/options.h) and runs the subcommand
// (cli/cmd_*.cpp).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "core/denormals.h"
#include "core/error.h"
#include "ops/conv_cpu.h"
#include "cli/commands.h"
#include "run/interrupt.h"
#include "train/trainer.h"

using namespace loupe;

namespace {
// OpenMP's threads (libgomp, oneDNN's and loupe's CPU pool) spin about 300,000 times before they
// sleep while they wait, and libgomp reads that count once, as it loads, before main(). With
// another process on one of the 2 cores, mnist_mlp's two threads spent their time spinning for
// each other: 2,293 samples/s, against 23,892 with --threads 1; with 3,000 spins 19,863, and on
// the idle machine 40,511 against 40,946 (lab/benchmarks.md). So the command starts itself again,
// once, with GOMP_SPINCOUNT=3000, unless the user set it or OMP_WAIT_POLICY (or it cannot).
void spin_less(char** argv) {
  if (cpu::dnnl_version().empty() || std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  setenv("GOMP_SPINCOUNT", "3000", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}
}  // namespace

int main(int argc, char** argv) {
  spin_less(argv);
  run::route_signals_to_one_thread();  // before any thread starts (run/interrupt.h says why)
  set_flush_denormals(true);  // float32 denormals to zero in every thread (core/denormals.h says why)
  // Past a file size limit (ulimit -f) a write fails with EFBIG, which every writer reports in one
  // sentence naming the file, instead of the kernel's SIGXFSZ ending the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  static const std::map<std::string, int (*)(const cli::Options&)> kCommands{
      {"train", cli::cmd_train}, {"eval", cli::cmd_eval},         {"generate", cli::cmd_generate},
      {"bench", cli::cmd_bench}, {"sweep", cli::cmd_sweep},       {"models", cli::cmd_models},
      {"peak", cli::cmd_peak},   {"roofline", cli::cmd_roofline}, {"copybench", cli::cmd_copybench},
      {"profile", cli::cmd_profile}, {"compare", cli::cmd_compare}, {"tune", cli::cmd_tune}};
  try {
    cli::Options o = cli::parse_options(argc, argv);
    if (o.version) { std::fputs(cli::version_text().c_str(), stdout); return 0; }
    if (o.command == "help") {  // loupe help [COMMAND]
      if (!o.model.empty() && !kCommands.count(o.model)) throw cli::UsageError(cli::unknown_command(o.model));
      std::fputs(cli::usage(o.model), stdout);
      return 0;
    }
    if (o.command.empty()) {  // asked for: the usage on stdout; no command: a usage error
      std::fputs(cli::kUsage, o.help ? stdout : stderr);
      return o.help ? 0 : 2;
    }
    if (o.help) {
      if (!kCommands.count(o.command)) throw cli::UsageError(cli::unknown_command(o.command));
      std::fputs(cli::usage(o.command), stdout);
      return 0;
    }
    auto cmd = kCommands.find(o.command);
    if (cmd == kCommands.end()) throw cli::UsageError(cli::unknown_command(o.command));
    // Before any data is loaded or step run; train's own, as its ranks write different outputs.
    if (o.command != "train") cli::check_outputs(o);
    return cmd->second(o);
  } catch (const cli::UsageError& e) {  // the command line itself: the ecosystem's status 2
    std::fprintf(stderr, "loupe: %s\n", e.what());
    return 2;
  } catch (const train::Interrupted&) {
    std::fprintf(stderr, "loupe: interrupted\n");
    return run::interrupt_exit_status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loupe: %s\n", e.what());
    return 1;
  }
}
