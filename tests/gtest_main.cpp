// The main() of every GoogleTest binary of the suite (instead of gtest_main): its exit status, not
// its output, tells CTest what happened (docs/testing.md).
//   1   a case failed (even beside skipped ones), or no case matched the filter (a wrong filter
//       must not pass for a clean run);
//   77  nothing failed and no case ran: every one skipped (CTest's SKIP_RETURN_CODE);
//   0   otherwise.
// Under LOUPE_TEST_REQUIRE=gpu (tests/CMakeLists.txt sets it for the `gpu` label) a skipped case
// is a failure on a machine that has a GPU: a GPU test there has no reason left to skip, and a
// skip for want of data or of a rank would hide work that never ran. LOUPE_TEST_REQUIRE=multigpu
// does the same where there are two GPUs or more. LOUPE_TEST_REQUIRE=cpu (CI sets it: every package
// is installed there) fails every skip but those a case marks as not for this machine or build
// (LOUPE_SKIP_NOT_HERE, tests/skip.h): a CPU case that skips for a missing package or data set fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/knobs.h"
#include "skip.h"

namespace {

// The GPUs this process sees (0 without a driver or in a CPU-only build).
int gpus() {
  if (!loupe::cuda_available()) return 0;
  return loupe::cuda_runtime()->device_count();
}

// LOUPE_TEST_REQUIRE (read through core/knobs.h, which refuses a value other than cpu, gpu or
// multigpu), or "" where unset.
std::string requirement() { return loupe::knobs::choice("LOUPE_TEST_REQUIRE").value_or(""); }

// Whether the machine meets a GPU requirement, so that every skip is a failure.
bool gpus_required_here(const std::string& req) {
  return (req == "gpu" || req == "multigpu") && gpus() >= (req == "multigpu" ? 2 : 1);
}

// The skip's message: GoogleTest keeps it as the case's one skipped part.
std::string skip_message(const testing::TestResult& r) {
  for (int k = 0; k < r.total_part_count(); ++k)
    if (r.GetTestPartResult(k).skipped()) return r.GetTestPartResult(k).message();
  return "";
}

// The skipped cases the requirement does not accept, as "Suite.Case (why)": every skip under a GPU
// requirement the machine meets; under cpu, those not marked LOUPE_SKIP_NOT_HERE.
std::vector<std::string> unaccepted_skips(const testing::UnitTest& u, const std::string& req) {
  std::vector<std::string> out;
  const bool every = gpus_required_here(req);
  if (!every && req != "cpu") return out;
  for (int i = 0; i < u.total_test_suite_count(); ++i) {
    const testing::TestSuite& s = *u.GetTestSuite(i);
    for (int j = 0; j < s.total_test_count(); ++j) {
      const testing::TestInfo& t = *s.GetTestInfo(j);
      if (!t.should_run() || !t.result()->Skipped()) continue;
      const std::string why = skip_message(*t.result());
      if (every || why.rfind(loupe::test::kNotHere, 0) != 0)
        out.push_back(std::string(s.name()) + "." + t.name() + " (" + why + ")");
    }
  }
  return out;
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
  std::vector<std::string> bad;
  std::string req;
  try {
    req = requirement();
    if (skipped > 0) bad = unaccepted_skips(u, req);
  } catch (const std::exception& e) {
    std::printf("loupe tests: FAILED: %s\n", e.what());
    return 1;
  }
  if (!bad.empty()) {
    if (req == "cpu")
      std::printf("loupe tests: FAILED: %zu case(s) skipped under LOUPE_TEST_REQUIRE=cpu for want of something "
                  "tools/setup.sh installs (only LOUPE_SKIP_NOT_HERE skips pass there: tests/skip.h):\n", bad.size());
    else
      std::printf("loupe tests: FAILED: %zu case(s) skipped on a machine that meets LOUPE_TEST_REQUIRE=%s (%d GPUs):\n",
                  bad.size(), req.c_str(), gpus());
    for (const std::string& s : bad) std::printf("  skipped: %s\n", s.c_str());
    return 1;
  }
  if (u.successful_test_count() == 0 && skipped > 0) {
    std::printf("loupe tests: every case skipped (exit 77)\n");
    return 77;
  }
  return 0;
}
