#!/usr/bin/env bash
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
t0=$(date +%s)
(cmake -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$O/build.log" 2>&1 &&
  cmake --build build-gpu >> "$O/build.log" 2>&1) || { tail -30 "$O/build.log"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
for round in 1 2; do
  for w in 16 32; do
    t1=$(date +%s)
    LOUPE_DDP_WIRE=$w timeout 200 build-gpu/loupe bench imdb_bilstm --gpus 1,2 --batch 1024 --precision fp16 > "$O/bench-w$w-r$round.log" 2>&1
    echo "wire $w round $round rc $? in $(( $(date +%s) - t1 )) s"
    grep -iE "scaling|samples/s|nccl|world" "$O/bench-w$w-r$round.log" | tail -8
  done
done
