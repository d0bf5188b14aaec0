#!/usr/bin/env bash
# Issue 31's done-when figures in one call on two GPUs: the recipe's accuracy, the loader at 1024
# per GPU, resident cifar10_cnn and imdb_bilstm benches, the launchers, PyTorch DDP beside loupe.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"; S=$O/summary.txt; t0=$SECONDS
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
echo "built at $((SECONDS-t0)) s" >> $S; nvidia-smi --query-gpu=name --format=csv,noheader >> $S
PARTS="accuracy loader launchers" dev/device_check_ddp.sh > /dev/null 2>&1
echo "ddp parts done at $((SECONDS-t0)) s" >> $S
for r in 1 2; do for m in cifar10_cnn imdb_bilstm; do
  log=$(timeout 200 build-gpu/loupe bench $m --gpus 1,2 --batch 1024 --precision fp16 2>&1)
  echo "== $m r$r" >> $O/bench.log; echo "$log" >> $O/bench.log
  echo "$m r$r: $(echo "$log" | grep -E '^ +[12] ' | awk '{printf "%s:%s %s | ", $1, $2, $4}')" >> $S
done; done
echo "benches done at $((SECONDS-t0)) s" >> $S
PARTS=pytorch PT_TIMEOUT=${PT_TIMEOUT:-330} dev/device_check_ddp.sh > /dev/null 2>&1
echo "done at $((SECONDS-t0)) s" >> $S
cat $S
