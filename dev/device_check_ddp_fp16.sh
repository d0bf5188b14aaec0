#!/usr/bin/env bash
# The two-GPU suite's `mlp fp16` bound (lab/plans/toward_the_floor.md): the world of two
# against one process, 50 steps, under each way of taking the Linear's bias (LOUPE_GEMM_EPILOGUE:
# never, always the heuristic's first, timed), with test_ddp's own printout of every case. If `off`
# passes and `on`/`auto` do not, the epilogue's path moves the 16-bit run; then compare its
# gradients with float64 (the plan's suspect: split-K parts added in the output type).
# Needs build-gpu/ built, two GPUs; logs and a summary in $OUT.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}
mkdir -p "$O"
S="$O/summary.txt"
for mode in off on auto; do
  LOUPE_GEMM_EPILOGUE=$mode timeout 120 ctest --test-dir build-gpu -R '^test_ddp_multigpu$' -V \
    > "$O/ddp-$mode.log" 2>&1
  echo "== LOUPE_GEMM_EPILOGUE=$mode (ctest rc $?)" >> "$S"
  grep -E '^\[(mlp|cnn|bilstm|float32)' "$O/ddp-$mode.log" | sort -u | cut -c1-160 >> "$S"
done
cat "$S"
