// The .npz reader (data/npz_zip.cpp, libzip): any bytes as an archive, its four arrays read as
// the model-file loaders read them. An accepted array must hold exactly its shape's bytes.
#include <vector>

#include "core/error.h"
#include "data/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe;
  static fuzz::TempFile file(".npz");
  try {
    const std::shared_ptr<data::NpzFile> z = data::open_npz(file.write(data, size));
    int arrays = 0;
    for (const char* name : {"x_train", "y_train", "x_test", "y_test"}) {
      const std::optional<data::NpyArray> a = data::npz_array(*z, name);
      if (!a) continue;
      if (size_t(a->numel()) * data::npy_type_size(a->type) != a->bytes.size()) __builtin_trap();
      ++arrays;
    }
    fuzz::accepted(arrays == 4 ? "an archive of the four arrays" : arrays ? "an archive of some arrays" : "an archive of none");
  } catch (const Error& e) {
    fuzz::rejected(e);
  }
  return 0;
}
