#!/usr/bin/env bash
# LOUPE_DDP_SM_CARVEOUT's A/B on two GPUs: `loupe bench MODEL --gpus 1,2` per carve-out, rounds
# alternating (CARVES, ROUNDS, MODEL); then NCCL's channel count from its own log.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
MODEL=${MODEL:-imdb_bilstm}
tools/dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
for r in $(seq 1 "${ROUNDS:-3}"); do
  for c in ${CARVES:-0 16 32}; do
    LOUPE_DDP_SM_CARVEOUT=$c timeout 200 build-gpu/loupe bench "$MODEL" --gpus 1,2 --batch 1024 --precision fp16 \
      > "$O/bench-c$c-r$r.log" 2>&1
    echo "carve $c round $r rc $?: $(grep -E '^ +2 ' "$O/bench-c$c-r$r.log") | one GPU $(grep -E '^ +1 ' "$O/bench-c$c-r$r.log" | awk '{print $2}')"
  done
done
NCCL_DEBUG=INFO timeout 60 build-gpu/loupe train "$MODEL" --synthetic --resident --batch 1024 --precision fp16 \
  --epochs 1 --gpus 2 --plain > "$O/nccl-info.log" 2>&1
grep -iE "channel|Using" "$O/nccl-info.log" | grep -v "^.*Channel [0-9][0-9]/" | head -12
