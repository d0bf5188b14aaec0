#include "data/cifar.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_check.h"
#include "data/paths.h"

namespace fs = std::filesystem;

namespace loupe::data {
namespace {

const char* kBatchDir = "cifar-10-batches-bin";
const char* kTrain[5] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                         "data_batch_4.bin", "data_batch_5.bin"};
const char* kTest = "test_batch.bin";
const char* kRefetch = "delete it and run data/fetch.sh cifar10 to download it again";
// The most batches.meta.txt may hold, checked before it is read: ten names of a line each, about
// 60 bytes in CIFAR-10's; 64 KiB is a thousand times that.
constexpr uint64_t kMaxMetaBytes = uint64_t(64) << 10;

// The folder holding the batch files: `dir` itself, or its cifar-10-batches-bin child.
fs::path batch_dir(const std::string& dir) {
  std::error_code ec;
  if (const std::string why = directory_problem(dir, "CIFAR-10 data directory"); !why.empty())
    throw Error(dir + ": " + why + "; run data/fetch.sh cifar10 (it fills ~/.cache/loupe/cifar10) or pass --data "
                "with the cifar-10-batches-bin folder of cifar-10-binary.tar.gz, or its parent");
  const fs::path d(dir);
  if (!fs::exists(d / kTrain[0], ec) && !fs::exists(d / kTest, ec) &&
      fs::is_directory(d / kBatchDir, ec))
    return d / kBatchDir;
  return d;
}

}  // namespace

void read_cifar10_batch(const std::string& file, int64_t records, std::vector<uint8_t>* images,
                        std::vector<uint8_t>* labels) {
  const fs::path path(file);
  if (records < 1) refuse_file(path, "a batch file holds at least one record, not " + std::to_string(records));
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::string hint;
    if (fs::exists(path.parent_path() / path.stem(), ec))  // data_batch_1 without .bin
      hint = " (the folder holds the Python version, cifar-10-python.tar.gz; loupe reads the "
             "binary version)";
    refuse_file(path, "file not found" + hint + "; run data/fetch.sh cifar10, or pass --data with the "
              "cifar-10-batches-bin folder of cifar-10-binary.tar.gz (or its parent)");
  }
  // Before any open: a FIFO would block it and a device would read without end.
  if (const std::string kind = what_else(path.string()); !kind.empty()) refuse_file(path, "is " + kind + ", not a CIFAR-10 batch file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) refuse_file(path, "cannot read its size: " + ec.message());
  const uintmax_t want = uintmax_t(records) * kCifarRecordBytes;
  if (size % kCifarRecordBytes != 0)
    refuse_file(path, "truncated record: the file has " + std::to_string(size) + " bytes, " +
                  std::to_string(size / kCifarRecordBytes) + " whole records of 3073 bytes and " +
                  std::to_string(size % kCifarRecordBytes) + " bytes left over (expected " +
                  std::to_string(want) + " bytes); " + kRefetch);
  if (size != want)
    refuse_file(path, "holds " + std::to_string(size / kCifarRecordBytes) +
                  " records of 3073 bytes, but every CIFAR-10 batch file holds exactly " + std::to_string(records) + "; " +
                  kRefetch);
  std::vector<uint8_t> b(size);
  std::ifstream f(path, std::ios::binary);
  if (!f) refuse_file(path, std::string("cannot open: ") + std::strerror(errno));
  if (!f.read(reinterpret_cast<char*>(b.data()), std::streamsize(size)))
    refuse_file(path, "read error after " + std::to_string(f.gcount()) + " bytes");
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* rec = b.data() + r * kCifarRecordBytes;
    if (rec[0] > 9)
      refuse_file(path, "record " + std::to_string(r) + " (byte offset " +
                    std::to_string(r * kCifarRecordBytes) + ") has label " +
                    std::to_string(rec[0]) + ", but CIFAR-10 labels are 0 to 9 (is this a "
                    "CIFAR-100 file?); " + kRefetch);
    labels->push_back(rec[0]);
    images->insert(images->end(), rec + 1, rec + kCifarRecordBytes);
  }
}

// The names in batches.meta.txt (one per line; blank lines, such as the trailing ones, skipped).
std::vector<std::string> read_cifar10_meta(const std::string& file) {
  const fs::path path(file);
  if (const std::string kind = what_else(file); !kind.empty()) refuse_file(path, "is " + kind + ", not a text file");
  std::string text;
  uint64_t size = 0;
  if (!read_capped(file, kMaxMetaBytes, &text, &size))
    refuse_file(path, with_commas(size) + " bytes, more than the " + with_commas(kMaxMetaBytes) + " (64 KiB) loupe reads "
              "for a list of class names (CIFAR-10's is about 60 bytes): not a batches.meta.txt; " + kRefetch +
              ", or delete it to use the standard names");
  std::istringstream f(text);
  std::vector<std::string> names;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  if (names.size() != 10)
    refuse_file(path, "holds " + std::to_string(names.size()) + " class names, expected 10 (one per "
              "line); " + kRefetch + ", or delete it to use the standard names");
  return names;
}

const std::vector<std::string>& cifar10_class_names() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird", "cat", "deer",
                                                 "dog", "frog", "horse", "ship", "truck"};
  return names;
}

CifarData load_cifar10(const std::string& dir) {
  const fs::path d = batch_dir(dir);
  CifarData c;
  c.dir = d.string();
  const size_t n_train = 5 * kCifarRecordsPerFile;
  c.train_images.reserve(n_train * kCifarImageBytes);
  c.train_labels.reserve(n_train);
  for (const char* f : kTrain) read_cifar10_batch((d / f).string(), kCifarRecordsPerFile, &c.train_images, &c.train_labels);
  c.test_images.reserve(kCifarRecordsPerFile * kCifarImageBytes);
  c.test_labels.reserve(kCifarRecordsPerFile);
  read_cifar10_batch((d / kTest).string(), kCifarRecordsPerFile, &c.test_images, &c.test_labels);
  c.n_train = int64_t(c.train_labels.size());
  c.n_test = int64_t(c.test_labels.size());
  std::error_code ec;
  const fs::path meta = d / "batches.meta.txt";
  c.class_names = fs::exists(meta, ec) ? read_cifar10_meta(meta.string()) : cifar10_class_names();
  return c;
}

std::vector<std::string> default_cifar10_dirs() { return search_places("cifar10"); }

std::optional<std::string> find_default_cifar10_dir() {
  return first_usable(default_cifar10_dirs(), [](const std::string& dir) {
    std::error_code ec;
    for (const fs::path& d : {fs::path(dir), fs::path(dir) / kBatchDir}) {
      bool all = fs::is_regular_file(d / kTest, ec);
      for (const char* f : kTrain) all = all && fs::is_regular_file(d / f, ec);
      if (all) return true;
    }
    return false;
  });
}

std::string cifar10_not_found() {
  return not_found("CIFAR-10", default_cifar10_dirs(),
                   "Fetch it with: data/fetch.sh cifar10   (or train on random data of its shape with --synthetic)");
}

}  // namespace loupe::data
