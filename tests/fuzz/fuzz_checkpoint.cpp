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
#include "fuzz_models.h"
#include "fuzz_util.h"
#include "train/checkpoint.h"

namespace {

using namespace loupe;

// Built once per process; the same tensors are loaded into by every input.
std::vector<fuzz::FuzzModel>& targets() {
  static std::vector<fuzz::FuzzModel> t = [] {
    std::vector<fuzz::FuzzModel> v;
    v.push_back(fuzz::fasttext_model());
    v.push_back(fuzz::tiny_cnn_model());
    return v;
  }();
  return t;
}

void load_all(const std::string& path) {
  for (fuzz::FuzzModel& t : targets()) {
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
