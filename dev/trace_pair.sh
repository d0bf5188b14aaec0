#!/usr/bin/env bash
# One GPU and rank 0 of two, the same model traced (--busy --trace) over the same global steps, so
# that scripts/trace_summary.py can set their kernels side by side: which ones the second GPU slows.
# MODEL (imdb_bilstm), ARGS (the train flags), STEPS (the profiled window), ROUNDS (2).
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
MODEL=${MODEL:-imdb_bilstm}
ARGS=${ARGS:---synthetic --resident --batch 1024 --precision fp16 --epochs 4}
STEPS=${STEPS:-30:45}
[ -x build-gpu/loupe ] || dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
for r in $(seq 1 "${ROUNDS:-2}"); do
  for g in 1 2; do
    timeout 120 build-gpu/loupe train "$MODEL" $ARGS --gpus "$g" --busy --trace "$O/trace-g$g-r$r.json" \
      --profile-steps "$STEPS" --plain > "$O/train-g$g-r$r.log" 2>&1
    echo "gpus $g round $r rc $?"; grep -E "samples/s" "$O/train-g$g-r$r.log" | tail -2
    python3 scripts/trace_summary.py "$O/trace-g$g-r$r.json" --top 40 > "$O/summary-g$g-r$r.txt" 2>&1
    head -1 "$O/summary-g$g-r$r.txt"
  done
done
