// loupe generate: char_lstm's text, a character at a time (run/generate.h).
#include <cstdio>

#include "core/error.h"
#include "cli/commands.h"
#include "run/generate.h"
#include "run/interrupt.h"

namespace loupe::cli {

int cmd_generate(const Options& o) {
  if (o.model != "char_lstm") throw Error("loupe generate works with char_lstm (a character model), got '" + o.model + "'");
  if (o.checkpoint.empty()) throw Error("loupe generate needs --checkpoint PATH (written by loupe train char_lstm --save PATH)");
  run::install_interrupt_handlers();  // Ctrl-C ends the text where it got to, which is already printed
  run::GenerateConfig c;
  c.run.model = models::find_model(o.model);
  c.run.device = pick_device(o);
  if (std::string why = precision_unsupported(o.precision[0], c.run.device); !why.empty()) throw Error(why);
  c.run.trainer.precision = o.precision[0];
  c.run.data = data_request(o, c.run.model, false, true);
  c.checkpoint = o.checkpoint;
  c.prompt = o.prompt;
  c.temperature = o.temperature;
  c.seed = o.seed;
  run::Generator g(c);
  note_unchecked_vocabulary(g.unchecked_vocabulary());
  std::printf("prompt (%zu characters): %s\n---\n%s", g.prompt_characters(), g.prompt().c_str(), g.prompt().c_str());
  std::fflush(stdout);
  // Each character is printed as it comes, so an interrupted run has given all it made.
  int64_t i = 0;
  for (; i < o.length && !run::interrupt_requested().load(); ++i) {
    std::fputs(g.next().c_str(), stdout);
    std::fflush(stdout);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (i < o.length) {
    std::fprintf(stderr, "loupe: interrupted after %lld of %lld characters; the text above is all there is\n",
                 (long long)i, (long long)o.length);
    return run::interrupt_exit_status();
  }
  return 0;
}

}  // namespace loupe::cli
