// The one kind of skip that LOUPE_TEST_REQUIRE=cpu accepts (docs/testing.md, "LOUPE_TEST_REQUIRE"):
// a case that is not for this machine or this build (no GPU, no NVML, fewer than two GPUs, a rank's
// process, a terminal, an AddressSanitizer build). A skip for a package or a data set that
// tools/setup.sh installs is a plain GTEST_SKIP(), and fails under that requirement.
#pragma once
#include <gtest/gtest.h>

namespace loupe::test {
inline constexpr const char* kNotHere = "not here: ";
}  // namespace loupe::test

#define LOUPE_SKIP_NOT_HERE GTEST_SKIP() << ::loupe::test::kNotHere
