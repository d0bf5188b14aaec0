#include "run/evaluate.h"

#include "core/error.h"
#include "models/keras_weights.h"
#include "models/session.h"
#include "train/checkpoint.h"

namespace loupe::run {

Evaluation evaluate(const RunConfig& c, const std::string& checkpoint) {
  models::SessionOptions so;
  so.device = c.device;
  so.trainer = c.trainer;
  Data data = c.loaded ? *c.loaded : load_data(c.data, c.device);
  so.vocab = data.vocab;
  so.chars = data.chars;  // a checkpoint trained on other characters or words is refused
  so.words = data.words;
  models::Session session(c.model, so);
  Evaluation e;
  if (checkpoint.empty()) {
    const std::string& weights = c.keras_weights.empty() ? c.model.own_weights : c.keras_weights;
    if (weights.empty()) throw Error("nothing to evaluate: no checkpoint and no weights");
    models::load_keras_weights_file(session.model(), c.model, weights);
  }
  else e.epochs = session.load_weights(checkpoint).epoch;
  e.data = data.description;
  e.unchecked_vocabulary = session.unchecked_vocabulary();
  e.accuracy = train::has_accuracy(c.model.recipe.loss);
  session.trainer().control().watch(c.interrupt);
  try {
    e.test_accuracy = session.trainer().evaluate(data.test);
  } catch (const train::Interrupted&) {
    e.interrupted = true;
    return e;
  }
  e.test_loss = session.trainer().last_eval_loss();
  return e;
}

}  // namespace loupe::run
