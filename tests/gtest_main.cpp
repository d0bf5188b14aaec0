// The main() of every GoogleTest binary of the suite (instead of gtest_main): its exit status, not
// its output, tells CTest what happened (docs/testing.md).
//   1   a case failed (even beside skipped ones), or no case matched the filter (a wrong filter
//       must not pass for a clean run);
//   77  nothing failed and no case ran: every one skipped (CTest's SKIP_RETURN_CODE);
//   0   otherwise.
// Under LOUPE_TEST_REQUIRE=gpu (tests/CMakeLists.txt sets it for the `gpu` label) a skipped case
// is a failure on a machine that has a GPU: a GPU test there has no reason left to skip, and a
// skip for want of data or of a rank would hide work that never ran. LOUPE_TEST_REQUIRE=multigpu
// does the same where there are two GPUs or more.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/cuda_runtime.h"
#include "core/knobs.h"

namespace {

// The GPUs this process sees (0 without a driver or in a CPU-only build).
int gpus() {
  if (!loupe::cuda_available()) return 0;
  return loupe::cuda_runtime()->device_count();
}

// Whether the machine meets LOUPE_TEST_REQUIRE (read through core/knobs.h, which refuses a value
// other than gpu or multigpu), so that skips are failures; the requirement's name in `what`.
bool required_here(std::string& what) {
  const std::optional<std::string> req = loupe::knobs::choice("LOUPE_TEST_REQUIRE");
  if (!req) return false;
  what = *req;
  return gpus() >= (what == "multigpu" ? 2 : 1);
}

void list_skipped(const testing::UnitTest& u) {
  for (int i = 0; i < u.total_test_suite_count(); ++i) {
    const testing::TestSuite& s = *u.GetTestSuite(i);
    for (int j = 0; j < s.total_test_count(); ++j) {
      const testing::TestInfo& t = *s.GetTestInfo(j);
      if (t.should_run() && t.result()->Skipped())
        std::printf("  skipped: %s.%s\n", s.name(), t.name());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (GTEST_FLAG_GET(list_tests)) return rc;
  const testing::UnitTest& u = *testing::UnitTest::GetInstance();
  if (rc != 0 || u.failed_test_count() > 0 || u.ad_hoc_test_result().Failed()) return 1;
  if (u.test_to_run_count() == 0) {
    std::printf("loupe tests: FAILED: no case matches the filter '%s'\n", GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
  const int skipped = u.skipped_test_count();
  std::string what;
  bool required = false;
  try {
    required = skipped > 0 && required_here(what);
  } catch (const std::exception& e) {
    std::printf("loupe tests: FAILED: %s\n", e.what());
    return 1;
  }
  if (required) {
    std::printf("loupe tests: FAILED: %d case(s) skipped on a machine that meets LOUPE_TEST_REQUIRE=%s (%d GPUs):\n",
                skipped, what.c_str(), gpus());
    list_skipped(u);
    return 1;
  }
  if (u.successful_test_count() == 0 && skipped > 0) {
    std::printf("loupe tests: every case skipped (exit 77)\n");
    return 77;
  }
  return 0;
}
