// HDF5 files as Keras saves weights in them (Keras 2 and tf.keras `.h5`, Keras 3 `.weights.h5`),
// read through Debian's libhdf5 (its C API; builds without it refuse every file, saying so): the
// string attributes and the float arrays of a file's groups, by path. Memory is bounded by what
// the caller expects, never by what the file declares: a string attribute is refused past
// kMaxH5Strings strings or kMaxH5Text bytes, and an array is read only after its shape was found
// to be the one the caller asked for.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loupe::data {

constexpr int64_t kMaxH5Strings = 100000;
constexpr int64_t kMaxH5Text = int64_t(16) << 20;

struct H5File;
// The file at `path`, opened read-only; refused in one sentence naming it (not a regular file,
// not HDF5, or a build without libhdf5).
std::shared_ptr<H5File> open_h5(const std::string& path);
bool h5_supported();
// The same from the bytes of an HDF5 file in memory (a .keras file's model.weights.h5); `name`
// for the messages.
std::shared_ptr<H5File> open_h5_image(const std::string& name, const std::vector<uint8_t>& bytes);

// Whether a group or dataset exists at `path` ("model_weights/fc1").
bool h5_has(H5File& f, const std::string& path);
// The strings of the attribute `name` of the object at `path` ("" for the root): one for a scalar,
// each of a one-dimensional one; fixed-length or variable-length, as h5py writes either; none for
// an empty one-dimensional attribute of any type (np.asarray([]) is float64). nullopt
// where the object has no such attribute; refused where it is not strings or is past the caps.
std::optional<std::vector<std::string>> h5_strings(H5File& f, const std::string& path, const std::string& name);
// The dataset at `path` as float32 (converted by HDF5 from any float or integer type), refused
// unless it exists, is numeric and has exactly `shape`: checked before anything is allocated.
std::vector<float> h5_floats(H5File& f, const std::string& path, const std::vector<int64_t>& shape);

// What a new HDF5 file holds: float32 datasets at their paths ("layers/dense/vars/0"; the groups
// on the way are made) and groups that hold nothing ("vars").
struct H5Array {
  std::string path;
  std::vector<int64_t> shape;
  const float* data;  // the shape's elements, row-major
};
// That file's bytes, made in memory by libhdf5 (its core driver, nothing written to disk): what a
// .keras file holds as its model.weights.h5. An Error in a build without libhdf5.
std::vector<uint8_t> h5_image_of(const std::vector<std::string>& groups, const std::vector<H5Array>& arrays);

}  // namespace loupe::data
