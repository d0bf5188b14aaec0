// NumPy's .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0), read strictly: what
// `np.save` writes for the dtypes loupe trains on. A file is the magic "\x93NUMPY", the version,
// the header's length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), the header (a Python dict
// literal: {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }) padded with
// spaces to a 16-byte boundary and ending in '\n', then the array's bytes in C order.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loupe::data {

enum class NpyType { U8, I32, I64, F16, F32, F64 };
const char* npy_type_name(NpyType t);  // "uint8", "int32", ...
size_t npy_type_size(NpyType t);

struct NpyArray {
  NpyType type = NpyType::U8;
  std::vector<int64_t> shape;  // () is a scalar: one element
  std::vector<uint8_t> bytes;  // little-endian, C order: numel() * npy_type_size(type)
  int64_t numel() const;
};

// The array of one .npy file. Refused, in one sentence naming the file (a loupe::Error): not a
// .npy file, a version other than 1.0/2.0/3.0, a header that is not the dict literal of the format
// (keys descr, fortran_order and shape, nothing else), a dtype other than uint8, int32, int64,
// float16, float32 and float64 little-endian, fortran_order True, a negative or overflowing
// shape, and data bytes other than the shape's (short or trailing), and a path that is not a
// regular file (before it is opened: data/paths.h's open_data_file). Memory is bounded by the
// file: the header is read first and checked against the file's size, and only then the data.
NpyArray read_npy(const std::string& path);

// The same from bytes in memory (`name` for the messages): what read_npy does after reading.
NpyArray parse_npy(const std::string& name, const std::vector<uint8_t>& file);

// For a reader that streams the data (a .npz member) and allocates it only once its header is
// known: npy_header_bytes says how many bytes the magic, version, length and header take, from the
// file's first `n` bytes (12 are enough; refused as parse_npy refuses them); npy_declared reads
// those bytes (`head`) as the header of a file of `size` bytes: the array's type and shape, its
// bytes not yet read, a size other than the shape's data and the header refused as parse_npy does.
size_t npy_header_bytes(const std::string& name, const uint8_t* p, size_t n);
NpyArray npy_declared(const std::string& name, const std::vector<uint8_t>& head, uint64_t size);

}  // namespace loupe::data

namespace loupe::data {

// A .npz file (np.savez, np.savez_compressed: a zip archive of NAME.npy members): the array NAME,
// read as read_npy reads a file; an absent member is nullopt. A member's .npy header is inflated
// first: a size the archive declares other than the header's, more than 50 times the member's
// compressed size (and 64 MiB), more than 8 GiB, or compressed bytes past the archive's size are
// refused before its data are allocated; then they are allocated once and inflated into, and a
// member holding more or fewer bytes is refused. An archive that is not a zip, or a path that is
// not a regular file, is refused too; each in one sentence naming the file and the member. Builds
// without libzip refuse every .npz (saying so).
struct NpzFile;
std::shared_ptr<NpzFile> open_npz(const std::string& path);
std::optional<NpyArray> npz_array(NpzFile& z, const std::string& name);
bool npz_has(NpzFile& z, const std::string& name);
bool npz_supported();

// The member `member` of the zip archive at `path` (a .keras file's config.json or
// model.weights.h5), whole; nullopt where the archive has no such member. Checked as npz_array
// checks a member before inflating it: at most `cap` bytes, compressed bytes inside the archive,
// at most 50 times its compressed size past 64 MiB; and it must hold the bytes it declares.
// Refused (a loupe::Error naming the file and the member) otherwise, or for what is not a zip
// archive; `kind` names the file in that refusal ("a .keras file").
std::optional<std::vector<uint8_t>> zip_member(const std::string& path, const std::string& member, uint64_t cap,
                                               const std::string& kind);

// A new zip archive at `path` of `members` (name, bytes), stored uncompressed, as Keras 3 writes
// a .keras file; written whole to a temporary file that then replaces `path` (libzip's way), so
// an interrupted write leaves what was there. An Error naming the file where it cannot be, or in a
// build without libzip.
void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint8_t>>>& members);

// An image data set as four .npy files in one folder, as Keras's datasets give it:
// x_train.npy, y_train.npy, x_test.npy, y_test.npy. Images uint8, [N, H, W] or [N, H, W, C]
// (channels-last, Keras's) or [N, C, H, W]; labels integers [N] or [N, 1], or one-hot [N, classes]
// (exactly one 1 a row), each label below `classes`.
struct NpyImages {
  int64_t n_train = 0, n_test = 0;
  std::vector<uint8_t> train_images, test_images;  // [N, C, H, W] (channels first, as loupe's layers)
  std::vector<uint8_t> train_labels, test_labels;
  std::string layout;  // how the images were stored: "[N, 28, 28]", "[N, 32, 32, 3] (channels-last)", ...
  bool split = false;  // the test set is the training arrays' last part (val_split)
};

// Whether `dir` holds the four files, or x_train.npy and y_train.npy alone (a set to split: see
// val_split below); some other part of them is an error by name. `dir` may also be a .npz file
// holding those arrays (np.savez(path, x_train=..., y_train=..., ...)); the loaders below take it
// wherever they take a folder.
bool has_npy_arrays(const std::string& dir);
// `sample` is the model's [C, H, W] or [H, W]: the images must have it (in one of the layouts
// above). Every refusal names the file and says what the models take. val_split (0 < F <= 0.9) is
// for a folder without the test files: the last F of the training arrays (at least one sample)
// become the test set, as Keras's validation_split takes the last part; without it such a folder is
// refused, and with the test files there it is refused too (one test set, never two).
NpyImages load_npy_images(const std::string& dir, const std::vector<int64_t>& sample, int classes,
                          double val_split = 0);

// A model file's data set (models/keras_json.h) in the same four files: x of any of the six dtypes
// whose shape per sample is the model's input as Keras has it ([N, H, W, C] for an image), labels
// as load_npy_images takes them (at most 256 classes; 2 for a sigmoid output: 0 or 1). The values
// as float32: uint8 scaled by 1/255, as the reference models scale their images, unless `ids` (the
// model starts with an Embedding: token ids, kept whole; any integer or whole float dtype); the
// others as they are, every value within float32's range (refused by file, row and value). Token
// ids are whole numbers from 0, below `vocab` (the Embedding's input_dim) when it is given. Memory:
// the arrays and their float copy.
// classes 0: a regression (mean squared error) of `outputs` values per sample: y as float32 targets
// [N] or [N, outputs] (any of the six dtypes, every value finite) in train_targets / test_targets,
// no labels.
struct NpyFeatures {
  int64_t n_train = 0, n_test = 0;
  std::vector<float> train_x, test_x;
  std::vector<uint8_t> train_labels, test_labels;
  std::vector<float> train_targets, test_targets;  // a regression's, n x outputs
  std::string x_type;  // the file's dtype, for the run's header
  bool split = false;
  std::vector<int64_t> sample;  // a sample's shape: the one asked for, its -1 (a free length) the arrays'
};
NpyFeatures load_npy_features(const std::string& dir, const std::vector<int64_t>& sample, int classes, bool ids,
                              double val_split = 0, int64_t outputs = 1, int64_t vocab = 0);

}  // namespace loupe::data
