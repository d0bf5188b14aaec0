// The outputs a command writes, checked before any data is loaded or step run: each can be
// written, and none is an input of the run (docs/cli.md, "Inputs and outputs";
// docs/reliability.md).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "cli/cli_numbers.h"
#include "cli/options.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "run/data.h"

namespace loupe::cli {
namespace {

bool takes_option(const std::string& command, const std::string& option) {
  const std::vector<std::string> names = options_of(command);
  return std::find(names.begin(), names.end(), option) != names.end();
}

}  // namespace

std::string output_path(const Options& o, const std::string& option) {
  const std::map<std::string, const std::string*> values{{"csv", &o.csv},         {"png", &o.png},
                                                         {"json", &o.json},       {"plot", &o.plot},
                                                         {"metrics", &o.metrics}, {"trace", &o.trace},
                                                         {"timeline", &o.timeline}};
  const auto it = values.find(option);
  if (it == values.end()) throw Error("output_path: no output option --" + option);
  if (o.has(option)) return *it->second;
  const std::string ext = option == "png" ? ".png" : ".csv";
  if (option != "csv" && option != "png") return "";
  if (o.command == "sweep" || o.command == "profile") return o.command + "-" + models::model_stem(o.model) + ext;
  if (o.command == "roofline") return "roofline" + ext;
  if (o.command == "compare" && option == "csv" && o.has("plot")) return o.plot + ".csv";  // the plot reads it
  return "";
}

namespace {

std::string dataset_of(const std::string& model) {
  for (const models::ModelInfo& m : models::all_models())
    if (m.name == model) return m.recipe.dataset;
  return "";
}

// What the run reads, as the command line names it: the model file, --data (or the data set's
// default folder), the checkpoint resumed or evaluated, the Keras weights, compare's runs.
std::vector<InputPath> inputs_of(const Options& o) {
  std::vector<InputPath> in;
  if (o.command == "bench" || o.command == "sweep") {
    for (const std::string& m : parse_list(o.model)) in.push_back({"the model file", m});
  } else if (!o.model.empty() && o.command != "compare") {
    in.push_back({"the model file", o.model});
  }
  for (const std::string& f : o.files) in.push_back({"the input", f});
  if (!o.resume.empty()) in.push_back({"the --resume checkpoint", o.resume, false, "--save"});
  if (!o.checkpoint.empty()) in.push_back({"the --checkpoint file", o.checkpoint});
  if (!o.weights.empty()) in.push_back({"the --weights file", o.weights});
  const bool has_model = o.command != "compare" && o.command != "roofline";
  if (!o.data.empty()) in.push_back({"the --data", o.data, true});
  else if (has_model)
    for (const std::string& d : run::default_data_paths(dataset_of(o.model))) in.push_back({"the data", d, true});
  return in;
}

}  // namespace

void check_outputs(const Options& o) {
  std::vector<OutputPath> outputs;
  if (takes_option(o.command, "save") && !o.save.empty()) outputs.push_back({"--save", o.save});
  if (takes_option(o.command, "save-keras") && !o.save_keras.empty()) outputs.push_back({"--save-keras", o.save_keras});
  for (const char* name : {"metrics", "csv", "json", "png", "plot", "trace", "timeline"})
    if (takes_option(o.command, name) && !output_path(o, name).empty())
      outputs.push_back({"--" + std::string(name) + (o.has(name) ? "" : " (default)"), output_path(o, name)});
  if (o.has("tensorboard")) outputs.push_back({"--tensorboard", o.tensorboard, true});
  try {
    check_inputs_kept(outputs, inputs_of(o));
  } catch (const Error& e) {  // the command line's paths: the ecosystem's status 2
    throw UsageError(e.what());
  }
  // The paths given first, then the defaults: --plot P names P before the P.csv it implies.
  for (const bool given : {true, false})
    for (const char* name : {"metrics", "csv", "json", "png", "plot", "trace", "timeline"}) {
      if (!takes_option(o.command, name) || o.has(name) != given) continue;
      const std::string path = output_path(o, name);
      if (!path.empty()) check_output_file(path, "--" + std::string(name) + (given ? "" : " (default)"));
    }
  if (o.has("tensorboard")) check_output_directory(o.tensorboard, "--tensorboard");
}

}  // namespace loupe::cli
