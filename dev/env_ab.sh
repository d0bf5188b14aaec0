#!/usr/bin/env bash
# Environment A/B on two GPUs: `loupe bench MODEL --gpus 1,2` once per configuration per round,
# the configurations alternating. CONFIGS: space-separated, each NAME=VAR=VALUE[,VAR=VALUE...]
# ("base=" for none); ROUNDS (3); MODEL (imdb_bilstm). One summary line per bench on stdout; the
# logs go to $OUT/bench.log, one file (the device returns only so many).
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
MODEL=${MODEL:-imdb_bilstm}
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
for r in $(seq 1 "${ROUNDS:-3}"); do
  for c in $CONFIGS; do
    name=${c%%=*}; vars=${c#*=}
    log=$(env $(echo "$vars" | tr ',' ' ') timeout 200 build-gpu/loupe bench "$MODEL" --gpus 1,2 --batch 1024 \
      --precision fp16 2>&1)
    echo "== $name round $r" >> "$O/bench.log"; echo "$log" >> "$O/bench.log"
    echo "$name r$r: $(echo "$log" | grep -E '^ +2 ' | awk '{print $2, $4, $5, $6}') | one GPU $(echo "$log" | grep -E '^ +1 ' | awk '{print $2}')"
  done
done
