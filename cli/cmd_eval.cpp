// loupe eval: the test accuracy of a saved model.
#include <cstdio>

#include "core/error.h"
#include "models/session.h"
#include "cli/commands.h"
#include "run/interrupt.h"

namespace loupe::cli {

int cmd_eval(const Options& o) {
  if (o.model.empty()) throw Error("loupe eval needs a model name and --checkpoint PATH");
  if (o.checkpoint.empty()) throw Error("loupe eval needs --checkpoint PATH (written by loupe train --save PATH)");
  run::install_interrupt_handlers();  // as train: Ctrl-C stops within a second, loading or evaluating
  const models::ModelInfo info = model_with_flags(o.model, o);
  Device dev = pick_device(o);
  models::SessionOptions so;
  so.device = dev;
  so.trainer = trainer_options(o, dev);
  run::Data data = run::load_data(data_request(o, info, false, true), dev);
  so.vocab = data.vocab;
  so.chars = data.chars;  // a checkpoint trained on other characters or words is refused
  so.words = data.words;
  models::Session session(info, so);
  train::CheckpointMeta m = session.load_weights(o.checkpoint);
  note_unchecked_vocabulary(session.unchecked_vocabulary());
  session.trainer().control().watch(&run::interrupt_requested());
  double acc = 0;
  try {
    acc = session.trainer().evaluate(data.test);
  } catch (const train::Interrupted&) {
    // An accuracy over the batches seen so far would read as the model's: none is given.
    std::printf("interrupted while evaluating %s: no test accuracy\n", o.checkpoint.c_str());
    std::fflush(stdout);
    return run::interrupt_exit_status();
  }
  if (!train::has_accuracy(info.recipe.loss))  // a regression (mean squared error): its loss alone
    std::printf("%s after %d epochs, on %s: test loss %.4g\n", info.name.c_str(), m.epoch, data.description.c_str(),
                session.trainer().last_eval_loss());
  else
    std::printf("%s after %d epochs, on %s: test accuracy %.2f%%, test loss %.4f\n", info.name.c_str(), m.epoch,
                data.description.c_str(), 100 * acc, session.trainer().last_eval_loss());
  return 0;
}

}  // namespace loupe::cli
