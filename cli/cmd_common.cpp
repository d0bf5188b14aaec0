// What the subcommands share: the device, the data request, the trainer's options, reports, plots.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/thread_pool.h"
#include "instrument/report_io.h"
#include "instrument/tensorboard.h"
#include "ops/conv_cpu.h"
#include "ops/backend/gemm_cpu.h"
#include "cli/commands.h"
#include "models/keras_json.h"
#include "run/interrupt.h"
#include "parallel/comm.h"

namespace loupe::cli {

Device pick_device(const Options& o) {
  if (o.device.empty()) {
    if (cuda_available()) return kCUDA;
    // A notice, on stderr: stdout may be the run's output (loupe generate > text).
    std::fprintf(stderr, "loupe: note: %s: running on the CPU (--device cpu)\n",
                 cuda_runtime() ? "no CUDA GPU is visible" : "this loupe was built without CUDA");
    return kCPU;
  }
  Device dev = parse_device(o.device);
  if (dev.is_cuda() && !cuda_runtime())
    throw Error("--device cuda: this loupe was built without CUDA; rebuild with the CUDA Toolkit and cuDNN, or use --device cpu");
  if (dev.is_cuda() && !cuda_available())
    throw Error("--device cuda: no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES), or use --device cpu");
  return dev;
}

models::ModelInfo model_with_flags(const std::string& name, const Options& o) {
  models::ModelInfo info = models::find_model(name);
  if (!o.optimizer.empty()) {
    info.recipe = models::with_optimizer(info.recipe, o.optimizer);
    info.recipe_source = "the optimizer from --optimizer " + o.optimizer + ", with Keras's defaults for it" +
                         (info.recipe_source.empty() ? "" : "; " + info.recipe_source);
  }
  if (!o.loss.empty()) info = models::with_loss(std::move(info), o.loss);
  return info;
}

run::DataRequest data_request(const Options& o, const models::ModelInfo& info, bool augment, bool resident) {
  run::DataRequest r = run::request_for(info);
  r.dir = o.data;
  r.synthetic = o.synthetic;
  r.synthetic_kind = o.synthetic_kind;
  r.augment = augment;
  r.resident = resident;
  r.val_split = o.val_split;
  return r;
}

train::TrainerOptions trainer_options(const Options& o, Device dev) {
  train::TrainerOptions t;
  if (std::string why = precision_unsupported(o.precision[0], dev); !why.empty()) throw Error(why);
  t.precision = o.precision[0];
  t.graph = o.graph;
  if (std::string why = train::graph_unsupported(t.graph, dev); !why.empty()) throw Error(why);  // before loading data
  return t;
}

void note_unchecked_vocabulary(const std::string& unchecked) {
  if (!unchecked.empty()) std::fprintf(stderr, "loupe: note: %s\n", unchecked.c_str());
}

// The installed command finds its scripts beside itself: PREFIX/bin/loupe reads PREFIX/share/loupe
// (LOUPE_INSTALL_TOOLS_DIR is that path relative to the command's directory, from CMake's
// GNUInstallDirs); the build tree's command has none there and reads the sources' scripts/.
std::string tools_dir() {
  if (std::optional<std::string> dir = knobs::text("LOUPE_TOOLS_DIR")) return *dir;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / LOUPE_INSTALL_TOOLS_DIR;
    if (std::filesystem::is_regular_file(installed / "plot_util.py", ec))
      return installed.lexically_normal().string();
  }
  return LOUPE_TOOLS_DIR;
}

// A plotting script from tools_dir(), run by a Python that has matplotlib: Debian's
// /usr/bin/python3 first (a pyenv python3 on PATH may lack it).
int plot(const std::string& name, const std::string& csv, const std::string& png, const std::string& title) {
  std::string script = tools_dir() + "/" + name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(script, ec)) {
    std::printf("plot not written: %s is not there (set LOUPE_TOOLS_DIR to the directory of loupe's plot_*.py, "
                "installed in PREFIX/share/loupe); the table is in %s\n", script.c_str(), csv.c_str());
    return 1;
  }
  run::SignalsUnblocked child_takes_ctrl_c;  // the children inherit this thread's signal mask
  std::string python = std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") == 0 ? "/usr/bin/python3"
                                                                                                    : "python3";
  std::string cmd = python + " '" + script + "' '" + csv + "' '" + png + "'";
  if (!title.empty()) {  // single-quoted for the shell: a quote inside becomes '\''
    std::string q;
    for (char c : title) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " --title '" + q + "'";
  }
  std::fflush(stdout);  // our lines first, then the script's
  int rc = std::system(cmd.c_str());
  if (rc != 0)
    std::printf("plot not written: `%s` failed; it needs matplotlib (apt-get install python3-matplotlib, which "
                "tools/setup.sh installs); the table is in %s\n", cmd.c_str(), csv.c_str());
  return rc == 0 ? 0 : 1;
}

// CMake passes the build's facts (CMakeLists.txt, "the command").
std::string version_text() {
  std::string cuda = LOUPE_BUILD_CUDA;
  std::string s = std::string("loupe ") + LOUPE_VERSION + "\n";
  s += "CUDA: " + (cuda.empty() ? std::string("off (a CPU-only build)") : "on (" + cuda + ")");
  if (std::string cudnn = LOUPE_BUILD_CUDNN; !cudnn.empty()) s += ", cuDNN " + cudnn;
  s += "\nCPU GEMM: " + std::string(cpu::gemm_backend_name()) + "\n";
  const std::string dnnl = cpu::dnnl_version();
  s += "oneDNN: " + (dnnl.empty() ? std::string("off (float32 CPU convolutions by im2col + GEMM)") : "on (" + dnnl + ")") + "\n";
  s += std::string("TensorBoard: ") +
       (instrument::tensorboard_available() ? "on" : "off (needs libprotobuf-dev, protobuf-compiler, libboost-dev)") + "\n";
  s += std::string("NCCL: ") + (parallel::nccl_built() ? "on (--gpus N)" : "off (--gpus N needs it)") + "\n";
  s += "plot scripts: " + tools_dir() + "\n";
  return s;
}

}  // namespace loupe::cli
