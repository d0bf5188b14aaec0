// loupe eval: the test accuracy of a saved model (run/evaluate.h).
#include <cstdio>
#include <string>

#include "core/error.h"
#include "cli/commands.h"
#include "models/keras_json.h"
#include "run/evaluate.h"
#include "run/interrupt.h"

namespace loupe::cli {

int cmd_eval(const Options& o) {
  if (o.model.empty()) throw Error("loupe eval needs a model name and --checkpoint PATH");
  if (o.checkpoint.empty() && o.weights.empty() && !models::is_keras_archive(o.model))
    throw Error("loupe eval needs --checkpoint PATH (written by loupe train --save PATH) or --weights FILE (Keras's)");
  if (!o.checkpoint.empty() && !o.weights.empty()) throw Error("loupe eval takes --checkpoint or --weights, not both");
  run::install_interrupt_handlers();  // as train: Ctrl-C stops within a second, loading or evaluating
  run::RunConfig c;
  c.model = model_with_flags(o.model, o);
  c.device = pick_device(o);
  c.trainer = trainer_options(o, c.device);
  c.data = data_request(o, c.model, false, true);
  c.interrupt = &run::interrupt_requested();
  c.keras_weights = o.weights;
  const run::Evaluation e = run::evaluate(c, o.checkpoint);
  note_unchecked_vocabulary(e.unchecked_vocabulary);
  if (e.interrupted) {  // an accuracy over the batches seen so far would read as the model's: none is given
    const std::string& what = !o.checkpoint.empty() ? o.checkpoint : !o.weights.empty() ? o.weights : o.model;
    std::printf("interrupted while evaluating %s: no test accuracy\n", what.c_str());
    std::fflush(stdout);
    return run::interrupt_exit_status();
  }
  const std::string which = !o.checkpoint.empty() ? "after " + std::to_string(e.epochs) + " epochs"
                                                  : "with the weights of " + (o.weights.empty() ? o.model : o.weights);
  if (!e.accuracy)  // a regression (mean squared error): its loss alone
    std::printf("%s %s, on %s: test loss %.4g\n", c.model.name.c_str(), which.c_str(), e.data.c_str(), e.test_loss);
  else
    std::printf("%s %s, on %s: test accuracy %.2f%%, test loss %.4f\n", c.model.name.c_str(), which.c_str(),
                e.data.c_str(), 100 * e.test_accuracy, e.test_loss);
  return 0;
}

}  // namespace loupe::cli
