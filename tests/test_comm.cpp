// NCCL collectives between real processes (label multigpu): the test starts itself twice through
// the launcher (train/launch.h), each copy a rank on its own GPU that joins the world by the
// rendezvous and checks an all-reduce (sum and average), a broadcast and that the ranks agree.
// Skips, saying why, with fewer than 2 GPUs or without NCCL.
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

// The parent: two ranks of this same binary running only CommRank.*.
TEST(Comm, TwoRanksAgree) {
  if (is_rank()) GTEST_SKIP() << "a rank runs CommRank.* only";
  if (!train::nccl_built()) GTEST_SKIP() << "this loupe was built without NCCL";
  if (!cuda_available() || cuda_runtime()->device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  train::LaunchOptions o;
  o.exe = "/proc/self/exe";
  o.args = {"--gtest_filter=CommRank.*"};
  o.procs = 2;
  EXPECT_EQ(train::launch(o), 0) << "a rank failed (its output is above)";
}

TEST(CommRank, AllReduceAndBroadcast) {
  if (!is_rank()) GTEST_SKIP() << "run by Comm.TwoRanksAgree as a rank";
  std::string why;
  auto comm = train::join_world(&why);
  ASSERT_TRUE(comm) << why;
  const int r = comm->rank(), w = comm->world();
  ASSERT_EQ(w, 2);
  // 1 + 2 = 3 everywhere; the average 1.5; a large tensor too (NCCL splits it into chunks).
  Tensor t = full(Shape{1 << 20}, double(r + 1), DType::f32, kCUDA);
  comm->all_reduce(t, train::ReduceOp::Sum);
  std::vector<float> v = t.to_vector<float>();
  EXPECT_EQ(v.front(), 3.0f);
  EXPECT_EQ(v.back(), 3.0f);
  Tensor a = full(Shape{7}, double(r + 1), DType::f32, kCUDA);
  comm->all_reduce(a, train::ReduceOp::Avg);
  EXPECT_EQ(a.to_vector<float>()[3], 1.5f);
  Tensor b = full(Shape{5}, r == 0 ? 42.0 : -1.0, DType::f32, kCUDA);
  comm->broadcast(b, 0);
  EXPECT_EQ(b.to_vector<float>()[4], 42.0f);
  EXPECT_EQ(comm->async_error(), "");
}
