// The outputs a command writes, checked before any data is loaded or step run: each can be
// written, and none is an input of the run (docs/cli.md, "Inputs and outputs";
// docs/reliability.md).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "data/char_corpus.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "cli/cli_numbers.h"
#include "cli/options.h"
#include "models/keras_json.h"
#include "models/registry.h"

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

// A file or folder the run reads, as the command line names it: the model file, --data (or the
// data set's default folder), the checkpoint resumed or evaluated, the Keras weights, compare's runs.
struct Input {
  std::string what, path;  // what: "the model file", "the --resume checkpoint", ...
};

// The default data folders (or file) of the model's data set, where --data is not given: a model
// file may read MNIST's or CIFAR-10's (run/data.cpp finds them). Also for synthetic data, which
// reads none: a data set's folder holds no output either way.
std::vector<std::string> default_data(const Options& o) {
  std::string dataset;
  for (const models::ModelInfo& m : models::all_models())
    if (m.name == o.model) dataset = m.recipe.dataset;
  std::vector<std::optional<std::string>> found;
  if (dataset.empty() || dataset == "mnist") found.push_back(data::find_default_mnist_dir());
  if (dataset.empty() || dataset == "cifar10") found.push_back(data::find_default_cifar10_dir());
  if (dataset == "imdb" || dataset == "imdb_bigrams") found.push_back(data::find_default_imdb_dir());
  if (dataset == "chars") {
    const std::optional<std::string> text = data::find_default_nietzsche_path();
    found.push_back(text ? *text : "/usr/share/common-licenses/GPL-3");
  }
  std::vector<std::string> dirs;
  for (const auto& f : found)
    if (f) dirs.push_back(*f);
  return dirs;
}

std::vector<Input> inputs_of(const Options& o) {
  std::vector<Input> in;
  if (o.command == "bench" || o.command == "sweep") {
    for (const std::string& m : parse_list(o.model)) in.push_back({"the model file", m});
  } else if (!o.model.empty() && o.command != "compare") {
    in.push_back({"the model file", o.model});
  }
  for (const std::string& f : o.files) in.push_back({"the input", f});
  if (!o.resume.empty()) in.push_back({"the --resume checkpoint", o.resume});
  if (!o.checkpoint.empty()) in.push_back({"the --checkpoint file", o.checkpoint});
  if (!o.weights.empty()) in.push_back({"the --weights file", o.weights});
  const bool has_model = o.command != "compare" && o.command != "roofline";
  if (!o.data.empty()) in.push_back({"the --data", o.data});
  else if (has_model)
    for (const std::string& d : default_data(o)) in.push_back({"the data", d});
  return in;
}

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool dir = false;
  bool operator==(const FileId& b) const { return dev == b.dev && ino == b.ino; }
};

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino, S_ISDIR(st.st_mode)};
}

// How deep `path` lies inside `folder` (1: directly in it; 2 or more: in a folder of it), 0 when
// it does not: its real parents (symbolic links resolved, also for a path not there yet) compared
// with the folder by device and inode.
int depth_inside(const std::string& path, const FileId& folder) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) return 0;
  int depth = 1;
  for (std::filesystem::path p = real.parent_path(); !p.empty(); p = p.parent_path(), ++depth) {
    if (file_id(p.string()) == std::optional<FileId>(folder)) return depth;
    if (p == p.root_path()) break;
  }
  return 0;
}

// A name a data set's reader takes from the top of its folder: NumPy arrays, IDX files, CIFAR-10's
// batches and meta (docs/data.md). Other files there (a checkpoint, a metrics file) are no input.
bool read_as_data(const std::string& path) {
  const std::string n = std::filesystem::path(path).filename().string();
  for (const std::string ext : {".npy", ".npz", "-ubyte", "-ubyte.gz", ".bin", ".txt"})
    if (n.size() >= ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

// Every output against every input, by device and inode (docs/cli.md, "Inputs and outputs"): no
// output is an input file; in an input folder, none is a file its reader takes, nor lies in a
// folder of it (image classes, IMDb's reviews), nor is --tensorboard's folder of new files; the
// same whether the output exists yet or not, so a second run is judged as the first. --save may
// name the checkpoint it resumes: the run continues it.
void check_inputs_kept(const Options& o, const std::vector<std::pair<std::string, std::string>>& outputs) {
  const std::vector<Input> inputs = inputs_of(o);
  for (const auto& [option, path] : outputs) {
    const std::optional<FileId> out = file_id(path);
    for (const Input& in : inputs) {
      const std::optional<FileId> id = file_id(in.path);
      if (!id || (option == "--save" && in.what == "the --resume checkpoint")) continue;
      const bool data = in.what == "the --data" || in.what == "the data";
      const std::string name = in.what + (!data ? "" : id->dir ? " folder" : " file") + " '" + in.path + "'";
      std::string is;
      if (out && *out == *id) {
        is = name;
      } else if (id->dir) {
        const int depth = depth_inside(path, *id);
        if (depth >= 2 || (depth == 1 && (option == "--tensorboard" || read_as_data(path)))) is = "inside " + name;
      }
      if (!is.empty())
        throw UsageError(option + " '" + path + "' is " + is + ": loupe does not write over its inputs; give " +
                         option + " another path");
    }
  }
}

}  // namespace

void check_outputs(const Options& o) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (takes_option(o.command, "save") && !o.save.empty()) outputs.emplace_back("--save", o.save);
  if (takes_option(o.command, "save-keras") && !o.save_keras.empty()) outputs.emplace_back("--save-keras", o.save_keras);
  for (const char* name : {"metrics", "csv", "json", "png", "plot", "trace", "timeline"})
    if (takes_option(o.command, name) && !output_path(o, name).empty())
      outputs.emplace_back("--" + std::string(name) + (o.has(name) ? "" : " (default)"), output_path(o, name));
  if (o.has("tensorboard")) outputs.emplace_back("--tensorboard", o.tensorboard);
  check_inputs_kept(o, outputs);
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
