// The `loupe` command: parses the command line once (tools/options.h) and runs the subcommand
// (tools/cmd_*.cpp).
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "core/denormals.h"
#include "core/error.h"
#include "tools/commands.h"
#include "tools/interrupt.h"
#include "train/trainer.h"

using namespace loupe;

int main(int argc, char** argv) {
  tools::route_signals_to_one_thread();  // before any thread starts (tools/interrupt.h says why)
  set_flush_denormals(true);  // float32 denormals to zero in every thread (core/denormals.h says why)
  static const std::map<std::string, int (*)(const tools::Options&)> kCommands{
      {"train", tools::cmd_train}, {"eval", tools::cmd_eval},         {"generate", tools::cmd_generate},
      {"bench", tools::cmd_bench}, {"sweep", tools::cmd_sweep},       {"models", tools::cmd_models},
      {"peak", tools::cmd_peak},   {"roofline", tools::cmd_roofline}, {"copybench", tools::cmd_copybench},
      {"profile", tools::cmd_profile}, {"compare", tools::cmd_compare}};
  try {
    tools::Options o = tools::parse_options(argc, argv);
    if (o.version) { std::fputs(tools::version_text().c_str(), stdout); return 0; }
    if (o.command == "help") {  // loupe help [COMMAND]
      if (!o.model.empty() && !kCommands.count(o.model)) throw Error("unknown command '" + o.model + "' (see loupe --help)");
      std::fputs(tools::usage(o.model), stdout);
      return 0;
    }
    if (o.command.empty()) {
      std::fputs(tools::kUsage, stdout);
      return o.help ? 0 : 2;
    }
    if (o.help) {
      if (!kCommands.count(o.command)) throw Error("unknown command '" + o.command + "' (see loupe --help)");
      std::fputs(tools::usage(o.command), stdout);
      return 0;
    }
    auto cmd = kCommands.find(o.command);
    if (cmd == kCommands.end()) throw Error("unknown command '" + o.command + "' (see loupe --help)");
    return cmd->second(o);
  } catch (const train::Interrupted&) {
    std::fprintf(stderr, "loupe: interrupted\n");
    return tools::interrupt_exit_status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loupe: %s\n", e.what());
    return 1;
  }
}
