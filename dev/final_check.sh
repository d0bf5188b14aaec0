#!/usr/bin/env bash
# The device's part of a stop: the GPU suites on a two-GPU host, then the roofline at 16,384 (the
# table in docs/performance.md, CPU rows included). Logs and a summary in $OUT.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
for label in '^gpu$' multigpu; do
  LOUPE_DATA=$PWD/.devdata ctest --test-dir build-gpu -L "$label" --output-on-failure > "$O/ctest-${label//[^a-z]/}.log" 2>&1
  grep -E 'tests passed|tests failed|Total Test|\(Failed\)' "$O/ctest-${label//[^a-z]/}.log"
done
build-gpu/loupe roofline --sizes 16384 > "$O/roofline.log" 2>&1; tail -15 "$O/roofline.log"
