// The `loupe` command: train, eval and list the reference models.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "data/idx.h"
#include "models/registry.h"
#include "ops/gemm_cpu.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace loupe;

namespace {

const char* kUsage = R"(loupe: train deep networks on the CPU and NVIDIA GPUs, and see how well the GPU was used.

usage:
  loupe train MODEL [options]     train a reference model (defaults from its recipe)
  loupe eval MODEL --checkpoint PATH [--data DIR] [--device D]
                                  test accuracy of a saved model
  loupe models                    list the models and their recipes
  loupe --help | loupe train --help

Run `loupe train --help` for the training options.
)";

const char* kTrainUsage = R"(usage: loupe train MODEL [options]

options (defaults come from the model's recipe; `loupe models` lists them):
  --device cpu|cuda   where to train (default: cuda when a GPU is present, else cpu)
  --epochs N          number of epochs
  --batch N           batch size
  --lr X              learning rate
  --data DIR          a directory with the four MNIST-format files (raw or .gz); default: the
                      first found of $LOUPE_DATA/mnist, ~/.cache/loupe/mnist, ./data/mnist,
                      then the same for fashion-mnist, then /usr/share/datasets/fashion-mnist
  --seed N            seed for the weights, dropout and shuffling (default 1)
  --save PATH         write a checkpoint (model + optimizer) after every epoch
  --resume PATH       continue training from a checkpoint
  --max-steps N       stop each epoch after N steps (for quick checks)
  --threads N         CPU threads for the CPU backend (default: all cores)
)";

struct Args {
  std::string command, model;
  std::map<std::string, std::string> opts;
  bool help = false;
};

Args parse(int argc, char** argv) {
  Args a;
  static const std::vector<std::string> known{"device", "epochs", "batch", "lr", "data", "seed", "save",
                                              "resume", "max-steps", "threads", "checkpoint"};
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h" || s == "--help") { a.help = true; continue; }
    if (s.rfind("--", 0) == 0) {
      std::string key = s.substr(2), val;
      size_t eq = key.find('=');
      if (eq != std::string::npos) {
        val = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else {
        if (i + 1 >= argc) throw Error("option --" + key + " needs a value (see loupe --help)");
        val = argv[++i];
      }
      bool ok = false;
      for (const auto& k : known) ok |= k == key;
      if (!ok) throw Error("unknown option --" + key + " (see loupe " + a.command + " --help)");
      a.opts[key] = val;
    } else if (a.command.empty()) {
      a.command = s;
    } else if (a.model.empty()) {
      a.model = s;
    } else {
      throw Error("unexpected argument '" + s + "' (see loupe --help)");
    }
  }
  return a;
}

int64_t int_opt(const Args& a, const std::string& k, int64_t dflt, int64_t min_value = 1) {
  auto it = a.opts.find(k);
  if (it == a.opts.end()) return dflt;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (!end || *end || v < min_value)
    throw Error("--" + k + " needs an integer >= " + std::to_string(min_value) + ", got '" + it->second + "'");
  return v;
}

double float_opt(const Args& a, const std::string& k, double dflt) {
  auto it = a.opts.find(k);
  if (it == a.opts.end()) return dflt;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (!end || *end || !(v > 0)) throw Error("--" + k + " needs a positive number, got '" + it->second + "'");
  return v;
}

std::string str_opt(const Args& a, const std::string& k, const std::string& dflt = "") {
  auto it = a.opts.find(k);
  return it == a.opts.end() ? dflt : it->second;
}

Device pick_device(const Args& a) {
  std::string d = str_opt(a, "device");
  if (d.empty()) {
    if (cuda_available()) return kCUDA;
    std::printf("%s: running on the CPU (--device cpu)\n",
                cuda_runtime() ? "no CUDA GPU is visible" : "this loupe was built without CUDA");
    return kCPU;
  }
  Device dev = parse_device(d);
  if (dev.is_cuda() && !cuda_runtime())
    throw Error("--device cuda: this loupe was built without CUDA; rebuild with the CUDA Toolkit and cuDNN, or use --device cpu");
  if (dev.is_cuda() && !cuda_available())
    throw Error("--device cuda: no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES), or use --device cpu");
  return dev;
}

struct Data {
  train::TensorDataset train, test;
  std::string description;
};

Data load_data(const Args& a, Device dev) {
  std::string dir = str_opt(a, "data");
  if (dir.empty()) {
    auto found = data::find_default_mnist_dir();
    if (!found) throw Error("no data set found.\n" + data::how_to_get_data());
    dir = *found;
  }
  data::MnistData m = data::load_mnist(dir);
  Data d;
  auto to_tensor = [](const std::vector<uint8_t>& v, Shape s) { return from_vector(v, s); };
  d.train = train::TensorDataset{to_tensor(m.train_images, Shape{m.n_train, m.rows, m.cols}),
                                 to_tensor(m.train_labels, Shape{m.n_train})}.to(dev);
  d.test = train::TensorDataset{to_tensor(m.test_images, Shape{m.n_test, m.rows, m.cols}),
                                to_tensor(m.test_labels, Shape{m.n_test})}.to(dev);
  d.description = m.name + " from " + m.dir + " (" + std::to_string(m.n_train) + " train, " +
                  std::to_string(m.n_test) + " test)";
  return d;
}

std::string device_description(Device d) {
  if (d.is_cuda()) return d.str() + " (" + cuda_runtime()->device_name() + ")";
  return "cpu (" + std::to_string(num_threads()) + " threads, GEMM: " + cpu::gemm_backend_name() + ")";
}

int cmd_models() {
  for (const auto& m : models::all_models()) {
    const auto& r = m.recipe;
    std::printf("%-12s %s\n             %lld parameters; recipe: %s lr %g, batch %lld, %d epochs, data: %s\n",
                m.name.c_str(), m.description.c_str(), (long long)m.expected_parameters, r.optimizer.c_str(), r.lr,
                (long long)r.batch, r.epochs, r.dataset.c_str());
  }
  return 0;
}

int cmd_train(const Args& a) {
  if (a.model.empty()) throw Error("loupe train needs a model name, e.g. `loupe train mnist_mlp` (see loupe models)");
  const models::ModelInfo& info = models::find_model(a.model);
  if (a.opts.count("threads")) set_num_threads(int(int_opt(a, "threads", 1)));
  int epochs = int(int_opt(a, "epochs", info.recipe.epochs));
  int64_t batch = int_opt(a, "batch", info.recipe.batch);
  double lr = float_opt(a, "lr", info.recipe.lr);
  uint64_t seed = uint64_t(int_opt(a, "seed", 1, 0));
  int64_t max_steps = int_opt(a, "max-steps", -1, 1);
  std::string save = str_opt(a, "save"), resume = str_opt(a, "resume");
  Device dev = pick_device(a);

  Data data = load_data(a, dev);
  manual_seed(seed);
  std::shared_ptr<nn::Module> model = info.build();
  model->to(dev);
  auto opt = models::make_optimizer(info.recipe, model->arena(), lr);
  int first_epoch = 1;
  if (!resume.empty()) {
    train::CheckpointMeta m = train::load_checkpoint(resume, *model, opt.get(), info.name);
    first_epoch = m.epoch + 1;
    seed = m.seed;
    default_generator().seed = m.seed;
    default_generator().offset = m.rng_offset;
    std::printf("resumed from %s after epoch %d\n", resume.c_str(), m.epoch);
  }
  std::printf("model   %s: %s, %lld parameters\n", info.name.c_str(), info.description.c_str(),
              (long long)model->num_parameters());
  std::printf("device  %s\n", device_description(dev).c_str());
  std::printf("data    %s\n", data.description.c_str());
  std::printf("recipe  %s lr %g, batch %lld, epochs %d, seed %llu\n", opt->name().c_str(), lr, (long long)batch,
              epochs, (unsigned long long)seed);
  std::fflush(stdout);

  train::Trainer trainer(*model, *opt, dev);
  double best = -1, last = -1;
  int best_epoch = 0;
  double t_start = train::now_seconds();
  for (int e = first_epoch; e <= epochs; ++e) {
    train::EpochStats st = trainer.train_epoch(data.train, batch, seed, e, max_steps);
    double t0 = train::now_seconds();
    st.test_acc = trainer.evaluate(data.test);
    st.eval_seconds = train::now_seconds() - t0;
    last = st.test_acc;
    if (st.test_acc > best) { best = st.test_acc; best_epoch = e; }
    std::printf("epoch %2d/%d  loss %.4f  train acc %6.2f%%  test acc %6.2f%%  %6.2f s  %10.0f samples/s\n", e,
                epochs, st.train_loss, 100 * st.train_acc, 100 * st.test_acc, st.train_seconds + st.eval_seconds,
                st.samples_per_sec());
    std::fflush(stdout);
    if (!save.empty())
      train::save_checkpoint(save, *model, opt.get(), {info.name, e, seed, default_generator().offset});
  }
  if (best >= 0)
    std::printf("done in %.1f s: final test accuracy %.2f%%, best %.2f%% (epoch %d)%s\n",
                train::now_seconds() - t_start, 100 * last, 100 * best, best_epoch,
                save.empty() ? "" : ("; checkpoint in " + save).c_str());
  return 0;
}

int cmd_eval(const Args& a) {
  if (a.model.empty()) throw Error("loupe eval needs a model name and --checkpoint PATH");
  std::string ck = str_opt(a, "checkpoint");
  if (ck.empty()) throw Error("loupe eval needs --checkpoint PATH (written by loupe train --save PATH)");
  const models::ModelInfo& info = models::find_model(a.model);
  Device dev = pick_device(a);
  Data data = load_data(a, dev);
  std::shared_ptr<nn::Module> model = info.build();
  model->to(dev);
  train::CheckpointMeta m = train::load_checkpoint(ck, *model, nullptr, info.name);
  auto opt = models::make_optimizer(info.recipe, model->arena(), info.recipe.lr);  // the trainer wants one; unused
  train::Trainer trainer(*model, *opt, dev);
  double acc = trainer.evaluate(data.test);
  std::printf("%s after %d epochs, on %s: test accuracy %.2f%%\n", info.name.c_str(), m.epoch,
              data.description.c_str(), 100 * acc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    if (a.command.empty() || a.command == "help") {
      std::fputs(kUsage, stdout);
      return a.command.empty() && !a.help ? 2 : 0;
    }
    if (a.command == "train" && a.help) { std::fputs(kTrainUsage, stdout); return 0; }
    if (a.help) { std::fputs(kUsage, stdout); return 0; }
    if (a.command == "train") return cmd_train(a);
    if (a.command == "eval") return cmd_eval(a);
    if (a.command == "models") return cmd_models();
    throw Error("unknown command '" + a.command + "' (see loupe --help)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loupe: %s\n", e.what());
    return 1;
  }
}
