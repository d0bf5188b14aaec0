// NCCL collectives between real processes: the test starts itself through the launcher
// (parallel/launch.h), each copy a rank on its own GPU that joins the world by the rendezvous and
// checks an all-reduce (sum and average) and a broadcast. test_comm_gpu runs a world of one (label
// gpu), test_comm_multigpu two ranks and, on a host of more, every GPU (label multigpu); each skips,
// saying why, without GPUs or NCCL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "loupe.h"
#include "parallel/comm.h"
#include "parallel/launch.h"
#include "skip.h"

using namespace loupe;

namespace {
bool is_rank() { return std::getenv("WORLD_SIZE") != nullptr; }
}  // namespace

// The parent: `procs` ranks of this same binary running only CommRank.*.
int run_ranks(int procs) {
  parallel::LaunchOptions o;
  o.exe = "/proc/self/exe";
  o.args = {"--gtest_filter=CommRank.*"};
  o.procs = procs;
  return parallel::run_ranks(o);
}

// A world of one on one GPU: NCCL's calls for real, where one GPU is all there is.
TEST(Comm, OneRank) {
  if (is_rank()) LOUPE_SKIP_NOT_HERE << "a rank runs CommRank.* only";
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  if (!parallel::nccl_built()) LOUPE_SKIP_NOT_HERE << "this loupe was built without NCCL";
  EXPECT_EQ(run_ranks(1), 0) << "the rank failed (its output is above)";
}

// Two ranks, and where the host has more GPUs a world of all of them (up to 8).
TEST(Comm, TwoRanksAndEveryGpu) {
  if (is_rank()) LOUPE_SKIP_NOT_HERE << "a rank runs CommRank.* only";
  if (!parallel::nccl_built()) LOUPE_SKIP_NOT_HERE << "this loupe was built without NCCL";
  if (!cuda_available() || cuda_runtime()->device_count() < 2) LOUPE_SKIP_NOT_HERE << "needs 2 GPUs";
  EXPECT_EQ(run_ranks(2), 0) << "a rank of the world of 2 failed (its output is above)";
  const int all = std::min(cuda_runtime()->device_count(), 8);
  if (all > 2) EXPECT_EQ(run_ranks(all), 0) << "a rank of the world of " << all << " failed (its output is above)";
}

TEST(CommRank, AllReduceAndBroadcast) {
  if (!is_rank()) LOUPE_SKIP_NOT_HERE << "run by Comm.TwoRanksAndEveryGpu as a rank";
  std::string why;
  auto comm = parallel::join_world(&why);
  ASSERT_TRUE(comm) << why;
  const int r = comm->rank(), w = comm->world();
  ASSERT_EQ(w, std::atoi(std::getenv("WORLD_SIZE")));
  // Element i of rank r holds (i % 251 + 1) * (r + 1): the sum is (i % 251 + 1) * w(w+1)/2 and the
  // average (i % 251 + 1) * (w+1)/2, exact in float32. Every element is checked: a large tensor is
  // split into chunks (and across channels) by NCCL, and a wrong offset or a dropped chunk shows
  // only there. Each rank's values differ per element, so a copy of one rank's input fails too.
  auto per_element = [&](int64_t n, double rank_factor) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i % 251 + 1) * rank_factor);
    return v;
  };
  auto expect_all = [](const Tensor& t, const std::vector<float>& want, const char* what) {
    const std::vector<float> got = t.to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && bad++ == 0) first = int64_t(i);
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements wrong, the first at " << first
                      << " (" << (first >= 0 ? got[size_t(first)] : 0.f) << ", want "
                      << (first >= 0 ? want[size_t(first)] : 0.f) << ")";
  };
  for (int64_t n : {int64_t(1) << 20, int64_t(7), int64_t(1000003)}) {
    Tensor t = to(from_vector(per_element(n, r + 1), Shape{n}), kCUDA);
    comm->all_reduce(t, parallel::ReduceOp::Sum);
    expect_all(t, per_element(n, w * (w + 1) / 2.0), "sum");
    Tensor a = to(from_vector(per_element(n, r + 1), Shape{n}), kCUDA);
    comm->all_reduce(a, parallel::ReduceOp::Avg);
    expect_all(a, per_element(n, (w + 1) / 2.0), "average");
    Tensor b = to(from_vector(per_element(n, r == 0 ? 1 : -(r + 1)), Shape{n}), kCUDA);
    comm->broadcast(b, 0);
    expect_all(b, per_element(n, 1), "broadcast from rank 0");
  }
  EXPECT_EQ(comm->async_error(), "");
}
