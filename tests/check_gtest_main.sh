#!/usr/bin/env bash
# CTest gtest_main_status: the exit status of every GoogleTest binary of the suite
# (tests/gtest_main.cpp), on a probe whose cases pass, skip and fail on purpose. CTest reads only
# this status: 77 a skip, 0 a pass, anything else a failure.
#   check_gtest_main.sh PROBE_BINARY CUDA_BUILD     (CUDA_BUILD: ON or OFF, CMake's LOUPE_WITH_CUDA)
set -u
probe=${1:?usage: check_gtest_main.sh PROBE_BINARY ON|OFF}
cuda_build=${2:?usage: check_gtest_main.sh PROBE_BINARY ON|OFF}
bad=0
expect() {  # expect STATUS WHY ARGS...: the probe run with ARGS exits with STATUS
  local want=$1 why=$2; shift 2
  "$@" > /dev/null 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then echo "ok   $got  $why"; else echo "FAIL $got (want $want)  $why: $*"; bad=1; fi
}
unset LOUPE_TEST_REQUIRE
expect 0  "a pass" "$probe" --gtest_filter=Probe.Passes
expect 77 "every case skipped" "$probe" --gtest_filter='Probe.Skip*'
expect 0  "a pass beside skips" "$probe" --gtest_filter='Probe.Passes:Probe.Skip*'
expect 1  "a failure beside a skip" "$probe" --gtest_filter='Probe.Fails:Probe.Skips'
expect 1  "a failure beside a pass" "$probe" --gtest_filter='Probe.Fails:Probe.Passes'
expect 1  "no case matches the filter" "$probe" --gtest_filter=Probe.NoSuchCase
expect 0  "listing the cases" "$probe" --gtest_list_tests
GTEST_FILTER='Probe.Skip*' expect 77 "the filter from the environment" "$probe"
# Under the gpu label a skip fails where the GPU is there; without one, it is still a skip.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
if [ "$cuda_build" = ON ] && [ "${gpus:-0}" -ge 1 ]; then
  LOUPE_TEST_REQUIRE=gpu expect 1 "a skip under the gpu label on a machine with a GPU" "$probe" --gtest_filter='Probe.Passes:Probe.Skips'
  LOUPE_TEST_REQUIRE=gpu expect 0 "no skip under the gpu label on a machine with a GPU" "$probe" --gtest_filter=Probe.Passes
else
  LOUPE_TEST_REQUIRE=gpu expect 77 "every case skipped under the gpu label without a GPU" "$probe" --gtest_filter='Probe.Skip*'
  LOUPE_TEST_REQUIRE=gpu expect 0 "a pass beside a skip under the gpu label without a GPU" "$probe" --gtest_filter='Probe.Passes:Probe.Skips'
fi
LOUPE_TEST_REQUIRE=multigpu expect 0 "a pass under the multigpu label" "$probe" --gtest_filter=Probe.Passes
# Under cpu (CI) a skip fails unless the case marked it as not for this machine (tests/skip.h).
LOUPE_TEST_REQUIRE=cpu expect 1 "a plain skip under cpu" "$probe" --gtest_filter='Probe.Passes:Probe.Skips'
LOUPE_TEST_REQUIRE=cpu expect 0 "a not-here skip beside a pass under cpu" "$probe" --gtest_filter='Probe.Passes:Probe.SkipsNotHere'
LOUPE_TEST_REQUIRE=cpu expect 77 "only a not-here skip under cpu" "$probe" --gtest_filter=Probe.SkipsNotHere
LOUPE_TEST_REQUIRE=cpu expect 1 "a plain skip beside a not-here one under cpu" "$probe" --gtest_filter='Probe.Skip*'
LOUPE_TEST_REQUIRE=nonsense expect 1 "an unknown requirement" "$probe" --gtest_filter='Probe.Skips'
exit $bad
