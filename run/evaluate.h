// A saved model evaluated (`loupe eval`): the run's model, data and device (run/run.h's RunConfig:
// model, data, device, trainer, interrupt), the weights of a checkpoint, one pass over the test set.
#pragma once
#include <string>

#include "run/run.h"

namespace loupe::run {

struct Evaluation {
  bool interrupted = false;  // stopped by RunConfig::interrupt: no figure (a partial one would mislead)
  bool accuracy = true;      // the loss has an accuracy; a regression's figure is its loss alone
  double test_accuracy = 0, test_loss = 0;
  int epochs = 0;            // the epochs the checkpoint had completed (0 for Keras's weights)
  std::string data;          // the data set's description
  std::string unchecked_vocabulary;  // a checkpoint whose vocabulary could not be checked: what to say
};

// The weights are the checkpoint's, or, with `checkpoint` "", those of c.keras_weights (a Keras
// weights file), else a .keras model's own. Throws loupe::Error for weights that are not this model's, or data that cannot
// be read.
Evaluation evaluate(const RunConfig& c, const std::string& checkpoint);

}  // namespace loupe::run
