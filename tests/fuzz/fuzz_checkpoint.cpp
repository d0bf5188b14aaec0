// The checkpoint loader down to the model's tensors: train::load_checkpoint (the file format of
// train/checkpoint_file.cpp, then every record checked against the tensor it fills and copied
// into it, and the metadata numbers) into two real models with their optimizers and without:
// imdb_fasttext from models/registry at a vocabulary of 4 (an Embedding and a Linear; Adam), and
// a small CNN with a BatchNorm's buffers (RMSprop). The bytes are loaded as they are (mostly
// refused by the CRC) and with the CRC and end marker made right, so that mutations of the body
// reach the parser and the tensors.
#include <zlib.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "models/registry.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"

namespace {

using namespace loupe;

struct Target {
  std::string name;  // the model name the file must hold
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
};

// Built once per process; the same tensors are loaded into by every input.
std::vector<Target>& targets() {
  static std::vector<Target> t = [] {
    std::vector<Target> v;
    const models::ModelInfo& ft = models::find_model("imdb_fasttext");
    Target a{ft.name, ft.build_for(4), nullptr};
    a.model->to(kCPU);
    a.opt = models::make_optimizer(ft.recipe, a.model->arena(), ft.recipe.lr);
    v.push_back(std::move(a));
    auto cnn = std::make_shared<nn::Sequential>();
    cnn->add("conv", std::make_shared<nn::Conv2d>(1, 2, 3))
        .add("bn", std::make_shared<nn::BatchNorm2d>(2))
        .add("relu", std::make_shared<nn::ReLU>())
        .add("flat", std::make_shared<nn::Flatten>())
        .add("fc", std::make_shared<nn::Linear>(8, 3));
    Target b{"tiny_cnn", cnn, nullptr};
    b.model->to(kCPU);
    b.opt = std::make_unique<optim::RMSprop>(b.model->arena(), 1e-3);
    v.push_back(std::move(b));
    return v;
  }();
  return t;
}

void load_all(const std::string& path) {
  for (Target& t : targets()) {
    for (optim::Optimizer* opt : {t.opt.get(), static_cast<optim::Optimizer*>(nullptr)}) {
      try {
        const train::CheckpointMeta m = train::load_checkpoint(path, *t.model, opt, t.name);
        if (m.epoch < 0 || m.epoch > train::kMaxCheckpointEpoch || m.model != t.name) __builtin_trap();
        fuzz::accepted((t.name + (opt ? " with its optimizer" : "")).c_str());
      } catch (const Error& e) {
        loupe::fuzz::rejected(e);
      }
    }
  }
}

// The body with its CRC32 and end marker made right: replaced where the bytes end with the end
// marker, appended where they do not.
std::vector<uint8_t> fix_crc(const uint8_t* data, size_t size) {
  static const char kEnd[8] = {'L', 'O', 'U', 'P', 'E', 'E', 'N', 'D'};
  std::vector<uint8_t> b(data, data + size);
  if (b.size() >= 12 + 12 && std::memcmp(b.data() + b.size() - 8, kEnd, 8) == 0) b.resize(b.size() - 12);
  const uint32_t crc = uint32_t(crc32(0, b.data(), uInt(b.size())));
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(crc >> (8 * i)));
  b.insert(b.end(), kEnd, kEnd + 8);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::TempFile file;
  load_all(file.write(data, size));
  const std::vector<uint8_t> fixed = fix_crc(data, size);
  load_all(file.write(fixed.data(), fixed.size()));
  return 0;
}
