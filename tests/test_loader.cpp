// The asynchronous loader: coverage, determinism across worker counts, errors, shutdown, and
// (on a GPU) pinned against pageable slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "loader/loader.h"

using namespace loupe;
using namespace loupe::loader;

namespace {
// Sample i is the vector (i, i + 0.5) with label i % 7; sample `bad` throws.
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{2}; }
  void get(int64_t i, float* x, int32_t* y, uint64_t) const override {
    if (i == bad_) throw std::runtime_error("corrupt record");
    x[0] = float(i);
    x[1] = float(i) + 0.5f;
    *y = int32_t(i % 7);
  }

 private:
  int64_t n_, bad_;
};

std::vector<float> epoch_samples(DataLoader& dl, int epoch) {
  std::vector<float> seen;
  dl.start_epoch(epoch);
  Batch b;
  while (dl.next(b)) {
    std::vector<float> x = b.x.to_vector<float>();
    std::vector<int32_t> y = b.y.to_vector<int32_t>();
    for (int64_t k = 0; k < b.size; ++k) {
      EXPECT_EQ(x[size_t(2 * k + 1)], x[size_t(2 * k)] + 0.5f);
      EXPECT_EQ(y[size_t(k)], int32_t(x[size_t(2 * k)]) % 7);
      seen.push_back(x[size_t(2 * k)]);
    }
    dl.release(b);
  }
  return seen;
}
}  // namespace

TEST(Loader, EverySampleOncePerEpoch) {
  LoaderOptions o;
  o.batch = 32;
  o.workers = 3;
  o.prefetch = 2;
  DataLoader dl(std::make_shared<CountingDataset>(1000), o);
  EXPECT_EQ(dl.batches_per_epoch(), 32);
  for (int e = 1; e <= 2; ++e) {
    std::vector<float> s = epoch_samples(dl, e);
    ASSERT_EQ(s.size(), 1000u);
    std::sort(s.begin(), s.end());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(s[size_t(i)], float(i));
  }
}

TEST(Loader, OrderDependsOnSeedAndEpochNotOnWorkers) {
  auto run = [](int workers, int epoch) {
    LoaderOptions o;
    o.batch = 50;
    o.workers = workers;
    o.prefetch = 3;
    DataLoader dl(std::make_shared<CountingDataset>(999), o);
    return epoch_samples(dl, epoch);
  };
  std::vector<float> one = run(1, 4);
  EXPECT_EQ(one, run(8, 4));
  EXPECT_NE(one, run(8, 5));
}

TEST(Loader, DropLast) {
  LoaderOptions o;
  o.batch = 64;
  o.drop_last = true;
  DataLoader dl(std::make_shared<CountingDataset>(1000), o);
  EXPECT_EQ(dl.batches_per_epoch(), 15);
  EXPECT_EQ(epoch_samples(dl, 1).size(), 960u);
  o.batch = 2000;
  EXPECT_THROW(DataLoader dl2(std::make_shared<CountingDataset>(1000), o), loupe::Error);
  o.drop_last = false;  // smaller than one batch is an error either way
  try {
    DataLoader dl3(std::make_shared<CountingDataset>(1000), o);
    FAIL() << "expected an error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one batch of 2000"), std::string::npos) << e.what();
  }
}

TEST(Loader, WorkerExceptionSurfacesWithTheSampleIndex) {
  LoaderOptions o;
  o.batch = 10;
  o.workers = 4;
  DataLoader dl(std::make_shared<CountingDataset>(100, 37), o);
  try {
    epoch_samples(dl, 1);
    FAIL() << "expected the worker's error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 37"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupt record"), std::string::npos) << e.what();
  }
}

TEST(Loader, EarlyShutdownNeverHangs) {
  for (int i = 0; i < 300; ++i) {
    LoaderOptions o;
    o.batch = 8;
    o.workers = 1 + i % 8;
    o.prefetch = 1 + i % 4;
    DataLoader dl(std::make_shared<CountingDataset>(500), o);
    dl.start_epoch(1);
    Batch b;
    for (int k = 0; k < i % 5; ++k) {
      ASSERT_TRUE(dl.next(b));
      dl.release(b);
    }
    if (i % 3 == 0) dl.start_epoch(2);  // abandon an epoch midway
  }  // destruction stops the workers
}

TEST(LoaderGpu, PinnedAndPageableGiveIdenticalBatches) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: pinned vs pageable not run";
  auto run = [](bool pinned) {
    LoaderOptions o;
    o.batch = 64;
    o.pin_memory = pinned;
    o.device = kCUDA;
    DataLoader dl(std::make_shared<CountingDataset>(1000), o);
    return epoch_samples(dl, 3);
  };
  std::vector<float> a = run(true);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, run(false));
}
