// NCCL collectives between real processes: the test starts itself through the launcher
// (train/launch.h), each copy a rank on its own GPU that joins the world by the rendezvous and
// checks an all-reduce (sum and average) and a broadcast. test_comm_gpu runs a world of one
// (label gpu), test_comm_multigpu two ranks (label multigpu); each skips, saying why, without the
// GPUs or NCCL.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/cuda_runtime.h"
#include "loupe.h"
#include "train/comm.h"
#include "train/launch.h"

using namespace loupe;

namespace {
bool is_rank() { return std::getenv("WORLD_SIZE") != nullptr; }
}  // namespace

// The parent: `procs` ranks of this same binary running only CommRank.*.
int run_ranks(int procs) {
  train::LaunchOptions o;
  o.exe = "/proc/self/exe";
  o.args = {"--gtest_filter=CommRank.*"};
  o.procs = procs;
  return train::launch(o);
}

// A world of one on one GPU: NCCL's calls for real, where one GPU is all there is.
TEST(Comm, OneRank) {
  if (is_rank()) GTEST_SKIP() << "a rank runs CommRank.* only";
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  if (!train::nccl_built()) GTEST_SKIP() << "this loupe was built without NCCL";
  EXPECT_EQ(run_ranks(1), 0) << "the rank failed (its output is above)";
}

TEST(Comm, TwoRanks) {
  if (is_rank()) GTEST_SKIP() << "a rank runs CommRank.* only";
  if (!train::nccl_built()) GTEST_SKIP() << "this loupe was built without NCCL";
  if (!cuda_available() || cuda_runtime()->device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  EXPECT_EQ(run_ranks(2), 0) << "a rank failed (its output is above)";
}

TEST(CommRank, AllReduceAndBroadcast) {
  if (!is_rank()) GTEST_SKIP() << "run by Comm.TwoRanksAgree as a rank";
  std::string why;
  auto comm = train::join_world(&why);
  ASSERT_TRUE(comm) << why;
  const int r = comm->rank(), w = comm->world();
  ASSERT_EQ(w, std::atoi(std::getenv("WORLD_SIZE")));
  // Rank r holds r + 1: the sum is w(w+1)/2 everywhere, the average (w+1)/2; a large tensor too
  // (NCCL splits it into chunks).
  Tensor t = full(Shape{1 << 20}, double(r + 1), DType::f32, kCUDA);
  comm->all_reduce(t, train::ReduceOp::Sum);
  std::vector<float> v = t.to_vector<float>();
  EXPECT_EQ(v.front(), float(w * (w + 1) / 2));
  EXPECT_EQ(v.back(), float(w * (w + 1) / 2));
  Tensor a = full(Shape{7}, double(r + 1), DType::f32, kCUDA);
  comm->all_reduce(a, train::ReduceOp::Avg);
  EXPECT_EQ(a.to_vector<float>()[3], float(w + 1) / 2);
  Tensor b = full(Shape{5}, r == 0 ? 42.0 : -1.0, DType::f32, kCUDA);
  comm->broadcast(b, 0);
  EXPECT_EQ(b.to_vector<float>()[4], 42.0f);
  EXPECT_EQ(comm->async_error(), "");
}
