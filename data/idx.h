// The IDX file format of MNIST and Fashion-MNIST, and a loader for the four-file set.
// Format (big-endian): 0x00 0x00, type byte, ndim byte, ndim uint32 sizes, then the data.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::data {

// One IDX array. Only the unsigned-byte type (0x08) is supported: it is all MNIST uses.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads a raw or gzip-compressed IDX file (detected by the 0x1f 0x8b magic, not by the name).
// Any problem (missing, bad header, truncated, trailing bytes, corrupt gzip; a file larger than
// any IDX file, or a gzip one whose header declares more than 50 times its size and 64 MiB, both
// refused before reading or inflating) is a loupe::Error that names the file.
IdxArray read_idx(const std::string& path);

// The four MNIST-format files of one directory.
struct MnistData {
  std::string dir, name;  // name: "MNIST", "Fashion-MNIST" or "MNIST-format" (guessed from dir)
  std::string train_images_file;  // the file the training images came from (raw or .gz)
  int64_t rows = 28, cols = 28;
  int64_t n_train = 0, n_test = 0;
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;  // n*rows*cols
};

// Loads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte from dir, each raw or with a .gz suffix, and checks they fit together.
MnistData load_mnist(const std::string& dir);

// The directories searched when no --data flag is given, in order: MNIST proper first in every
// place of data/paths.h ($LOUPE_DATA/mnist, ~/.cache/loupe/mnist, data/mnist), then Fashion-MNIST
// in the same places, then Debian's /usr/share/datasets/fashion-mnist.
std::vector<std::string> default_mnist_dirs();

// The first of default_mnist_dirs() that holds a complete set of four files; empty if none.
std::optional<std::string> find_default_mnist_dir();

// A few lines telling the user how to get the data.
std::string how_to_get_data();

}  // namespace loupe::data
