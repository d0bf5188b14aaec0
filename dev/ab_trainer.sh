#!/usr/bin/env bash
# A/B on the device: this tree (build-gpu) against the tree in .base (a git worktree of the commit
# before, carried): the GPU suites on this tree, then `loupe bench` alternating the two builds.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
(SOURCE=.base BUILD=build-base TARGET=loupe_cli dev/gpu_configure.sh "$O/base.log") &
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
wait
for label in '^gpu$' multigpu; do
  LOUPE_DATA=$PWD/.devdata ctest --test-dir build-gpu -L "$label" --output-on-failure > "$O/ctest-${label//[^a-z]/}.log" 2>&1
  grep -E 'tests passed|tests failed|Total Test|\(Failed\)' "$O/ctest-${label//[^a-z]/}.log"
done
for r in 1 2 3; do
  for b in base gpu; do
    echo "== round $r build-$b"
    env ${BENCH_ENV:-} build-$b/loupe bench ${MODELS:-mnist_mlp,imdb_bilstm} ${BENCH_ARGS:---precision fp16 --steps 300} 2>&1 | grep -E "^(mnist|imdb|cifar|char)" | cut -c1-56
  done
done
