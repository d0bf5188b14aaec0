// loupe eval: the test accuracy of a saved model.
#include <cstdio>

#include "core/error.h"
#include "models/session.h"
#include "tools/commands.h"

namespace loupe::tools {

int cmd_eval(const Options& o) {
  if (o.model.empty()) throw Error("loupe eval needs a model name and --checkpoint PATH");
  if (o.checkpoint.empty()) throw Error("loupe eval needs --checkpoint PATH (written by loupe train --save PATH)");
  const models::ModelInfo& info = models::find_model(o.model);
  Device dev = pick_device(o);
  models::SessionOptions so;
  so.device = dev;
  so.trainer = trainer_options(o, dev);
  Data data = load_data(data_request(o, info, false, true), dev);
  so.vocab = data.vocab;
  models::Session session(info, so);
  train::CheckpointMeta m = session.load_weights(o.checkpoint);
  double acc = session.trainer().evaluate(data.test);
  std::printf("%s after %d epochs, on %s: test accuracy %.2f%%\n", info.name.c_str(), m.epoch,
              data.description.c_str(), 100 * acc);
  return 0;
}

}  // namespace loupe::tools
