// The .npy reader (data/npy.cpp): the bytes parsed in memory (parse_npy), then the same bytes as a
// file (read_npy, which reads the header first and checks it against the file's size before the
// data). Both must agree, and an accepted array must hold exactly its shape's bytes.
#include <vector>

#include "core/error.h"
#include "data/npy.h"
#include "fuzz_util.h"

namespace {

using namespace loupe;

bool check(const data::NpyArray& a) {
  return size_t(a.numel()) * data::npy_type_size(a.type) == a.bytes.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::TempFile file(".npy");
  bool in_memory = false;
  try {
    const data::NpyArray a = data::parse_npy("input", std::vector<uint8_t>(data, data + size));
    if (!check(a)) __builtin_trap();
    in_memory = true;
    fuzz::accepted("an array (in memory)");
  } catch (const Error& e) {
    fuzz::rejected(e);
  }
  try {
    const data::NpyArray a = data::read_npy(file.write(data, size));
    if (!check(a) || !in_memory) __builtin_trap();  // the two readings disagree
    fuzz::accepted("an array (from the file)");
  } catch (const Error& e) {
    if (in_memory) __builtin_trap();
    fuzz::rejected(e);
  }
  return 0;
}
