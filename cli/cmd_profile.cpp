// loupe profile: the profile of run/profile.h for `loupe train`'s run of one epoch; the report,
// CSV, JSON and the plot.
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/file_check.h"
#include "core/thread_pool.h"
#include "cli/commands.h"
#include "run/interrupt.h"
#include "run/profile.h"
#include "run/report.h"
#include "run/run.h"

namespace loupe::cli {

namespace {
int write_profile(const Options& o, const instrument::Profile& p) {
  std::printf("%s", run::profile_report(p, o.profile_steps.first, o.profile_steps.second).c_str());
  if (o.has("predict")) std::printf("%s", run::predict_report(p, o.predict).c_str());
  std::string csv = output_path(o, "csv");
  write_whole_file(csv, instrument::profile_csv(p));
  std::printf("table written to %s\n", csv.c_str());
  if (o.has("json")) {
    write_whole_file(o.json, instrument::profile_json(p));
    std::printf("JSON written to %s\n", o.json.c_str());
  }
  std::string png = output_path(o, "png");
  // The plot says what it is of: the model, the device and the precision.
  const std::string device = p.gpu ? cuda_runtime()->device_name() : "the CPU";
  return plot("plot_profile.py", csv, png,
              "loupe profile: " + o.model + " on " + device + ", " + precision_name(o.precision[0]));
}
}  // namespace

// `loupe train`'s run for one epoch that ends with the window (steps 20..39 by default), eager
// unless --graph, with CUPTI's activity records on a GPU; then the report.
int cmd_profile(const Options& o) {
  if (o.model.empty()) throw Error("loupe profile needs a model name, e.g. `loupe profile mnist_mlp` (see loupe models)");
  Options po = o;
  if (!o.has("profile-steps")) po.profile_steps = {20, 39};
  const bool graphed = o.has("graph") && o.graph != train::GraphMode::Off;
  if (graphed && o.counters)
    throw Error("--counters reads the kernels of an eager step; profile the graph without them, or --graph off");
  if (!graphed) po.graph = train::GraphMode::Off;
  po.busy = true;
  po.epochs = 1;
  po.plain = true;
  po.max_steps = po.profile_steps.second + (o.counters ? 1 : 0);  // the counter pass: one more step
  po.threads = po.threads.value_or(num_threads());  // a profile's steps at one count throughout
  run::install_interrupt_handlers();  // before loading data: Ctrl-C stops within a second anywhere
  run::Run run(run_config(po, model_with_flags(o.model, po), nullptr));
  if (o.has("predict") && !run.config().device.is_cuda())
    throw Error("--predict scales a GPU profile's rows to another GPU; this profile would be of the CPU");
  run::ReportPrinter().run_begin(run.info());
  run::ProfileRequest r;
  std::tie(r.first, r.last) = po.profile_steps;
  r.counters = o.counters;
  r.graphed = graphed;
  std::optional<instrument::Profile> p = run::profile(run, r);
  if (!p) return run::interrupt_exit_status();
  return write_profile(po, *p);
}

}  // namespace loupe::cli
