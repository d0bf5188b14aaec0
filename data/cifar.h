// The CIFAR-10 binary format (cifar-10-binary.tar.gz from www.cs.toronto.edu/~kriz) and a loader
// for its six batch files. Each file holds exactly 10,000 records of 3,073 bytes: one label byte
// (0..9), then 3,072 pixel bytes: the 32x32 red plane, then green, then blue, rows top to bottom.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::data {

constexpr int64_t kCifarRecordsPerFile = 10000;
constexpr int64_t kCifarImageBytes = 3 * 32 * 32;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;

struct CifarData {
  std::string dir;  // the cifar-10-batches-bin folder actually read
  int64_t n_train = 0, n_test = 0;
  // images: n x 3 x 32 x 32 (CHW, as stored); labels: n bytes, 0..9.
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;
  std::vector<std::string> class_names;  // from batches.meta.txt, or the standard ten if absent
};

// Reads data_batch_1.bin .. data_batch_5.bin (the training set, in that order) and
// test_batch.bin. `dir` may be the cifar-10-batches-bin folder itself or its parent. Any problem
// (missing file, a size that is not a whole number of records, a record count other than 10,000,
// a label above 9, a batches.meta.txt without ten names) is a loupe::Error naming the file.
CifarData load_cifar10(const std::string& dir);

// One batch file of `records` records (10000 in CIFAR-10; fewer in tests and the fuzzer), its
// pixels and labels appended; the size is checked before anything is read or allocated. And the
// class names of a batches.meta.txt (ten, one a line; at most 64 KiB, checked before it is read).
// Errors as load_cifar10's.
void read_cifar10_batch(const std::string& path, int64_t records, std::vector<uint8_t>* images,
                        std::vector<uint8_t>* labels);
std::vector<std::string> read_cifar10_meta(const std::string& path);

// The standard class names, in label order: airplane, automobile, ..., truck.
const std::vector<std::string>& cifar10_class_names();

// The directories searched when no --data flag is given, in order (data/paths.h): $LOUPE_DATA/cifar10,
// ~/.cache/loupe/cifar10 (where data/fetch.sh cifar10 puts it), data/cifar10.
std::vector<std::string> default_cifar10_dirs();

// The first of default_cifar10_dirs() holding all six batch files; empty if none.
std::optional<std::string> find_default_cifar10_dir();

// The error when find_default_cifar10_dir() finds nothing: the places it looked and how to fetch it.
std::string cifar10_not_found();

}  // namespace loupe::data
