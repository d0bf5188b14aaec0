// .npz in a build without libzip (CMake: loupe: NumPy .npz (libzip): OFF): every archive refused, saying why.
#include "core/error.h"
#include "data/npy.h"

namespace loupe::data {

struct NpzFile {};

std::shared_ptr<NpzFile> open_npz(const std::string& path) {
  throw Error(path + ": this loupe was built without libzip, so it reads no .npz; save the arrays with np.save "
              "into a folder (x_train.npy, y_train.npy, x_test.npy, y_test.npy), or install libzip-dev and rebuild");
}

std::optional<NpyArray> npz_array(NpzFile&, const std::string&) { return std::nullopt; }

bool npz_has(NpzFile&, const std::string&) { return false; }

bool npz_supported() { return false; }

std::optional<std::vector<uint8_t>> zip_member(const std::string& path, const std::string&, uint64_t, const std::string& kind) {
  throw Error(path + ": this loupe was built without libzip, so it reads no zip archive (" + kind +
              " is one); install libzip-dev and rebuild");
}

void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint8_t>>>&) {
  throw Error(path + ": this loupe was built without libzip, so it writes no zip archive; install libzip-dev and rebuild");
}

}  // namespace loupe::data
