// A GoogleTest binary for check_gtest_main.sh: cases that pass, skip and fail on purpose, chosen
// with --gtest_filter, to check the exit status of tests/gtest_main.cpp.
#include <gtest/gtest.h>

#include "skip.h"

TEST(Probe, Passes) { SUCCEED(); }
TEST(Probe, Skips) { GTEST_SKIP() << "on purpose"; }
TEST(Probe, SkipsToo) { GTEST_SKIP() << "on purpose"; }
TEST(Probe, SkipsNotHere) { LOUPE_SKIP_NOT_HERE << "on purpose"; }
TEST(Probe, Fails) { ADD_FAILURE() << "on purpose"; }
