// The CIFAR-10 reader (data/cifar.cpp): the bytes as a batch file of as many records as they
// hold (at least one), and of one record more (the size check), and as a batches.meta.txt.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "data/cifar.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loupe::fuzz::TempFile file;
  const std::string& path = file.write(data, size);
  const int64_t records = std::max<int64_t>(1, int64_t(size) / loupe::data::kCifarRecordBytes);
  for (int64_t r : {records, records + 1}) {
    try {
      std::vector<uint8_t> images, labels;
      loupe::data::read_cifar10_batch(path, r, &images, &labels);
      if (int64_t(labels.size()) != r || int64_t(images.size()) != r * loupe::data::kCifarImageBytes) __builtin_trap();
      for (uint8_t l : labels)
        if (l > 9) __builtin_trap();
      loupe::fuzz::accepted("a batch file");
    } catch (const loupe::Error& e) {
      loupe::fuzz::rejected(e);
    }
  }
  try {
    if (loupe::data::read_cifar10_meta(path).size() != 10) __builtin_trap();
    loupe::fuzz::accepted("a batches.meta.txt");
  } catch (const loupe::Error& e) {
    loupe::fuzz::rejected(e);
  }
  return 0;
}
