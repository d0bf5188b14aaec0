// HDF5 in a build without libhdf5 (CMake: loupe: HDF5 (libhdf5): OFF): every file refused, saying why.
#include "core/error.h"
#include "data/h5.h"

namespace loupe::data {

struct H5File {};

std::shared_ptr<H5File> open_h5(const std::string& path) {
  throw Error(path + ": this loupe was built without libhdf5, so it reads no HDF5 (.h5) file; install libhdf5-dev "
              "and rebuild");
}

bool h5_supported() { return false; }

std::shared_ptr<H5File> open_h5_image(const std::string& name, const std::vector<uint8_t>& bytes) {
  (void)bytes;
  return open_h5(name);
}

bool h5_has(H5File&, const std::string&) { return false; }

std::optional<std::vector<std::string>> h5_strings(H5File&, const std::string&, const std::string&) { return std::nullopt; }

std::vector<float> h5_floats(H5File&, const std::string&, const std::vector<int64_t>&) { return {}; }

std::vector<uint8_t> h5_image_of(const std::vector<std::string>&, const std::vector<H5Array>&) {
  throw Error("this loupe was built without libhdf5, so it writes no HDF5 file; install libhdf5-dev and rebuild");
}

}  // namespace loupe::data
