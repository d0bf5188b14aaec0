#!/usr/bin/env bash
# Call 1 (two GPUs): build this tree and .base (85fe415, before the loader's ahead start), the GPU
# suites on this tree, then the loader A/B: mnist_cnn fp16 through the loader at 1024 per GPU on
# Fashion-MNIST, 1 and 2 GPUs, base/new alternating, ROUNDS rounds; samples/s = rank 0's median of
# epochs 2..; then imdb_bilstm bench --gpus 1,2 (this tree) IMDB times.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"; S=$O/summary.txt; t0=$SECONDS
D=$PWD/.devdata/fashion-mnist
(SOURCE=.base BUILD=build-base TARGET=loupe_cli dev/gpu_configure.sh "$O/base.log") &
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
wait; echo "built at $((SECONDS-t0)) s" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
steady() { python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v = [r.get("world_samples_per_sec") or r["samples_per_sec"] for r in recs if r.get("rank", 0) == 0 and r["epoch"] >= 2]
print(round(statistics.median(v)) if v else 0)
PY
}
if [ "${TESTS:-1}" = 1 ]; then
  for l in '^gpu$' multigpu; do
    LOUPE_DATA=$PWD/.devdata timeout 400 ctest --test-dir build-gpu -L "$l" --output-on-failure > "$O/ctest-${l//[^a-z]/}.log" 2>&1
    grep -E 'tests passed|tests failed|Total Test|\(Failed\)|Timeout' "$O/ctest-${l//[^a-z]/}.log" | sed "s/^/$l: /" >> $S
  done
  echo "suites done at $((SECONDS-t0)) s" >> $S
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for side in base new; do
    exe=build-gpu/loupe; [ $side = base ] && exe=build-base/loupe
    for g in 1 2; do
      f=$O/loader-$side-${g}g-r$r.jsonl; rm -f $f
      timeout 120 $exe train mnist_cnn --data "$D" --gpus $g --batch 1024 --precision fp16 --epochs ${EPOCHS:-4} --plain --metrics $f > ${f%.jsonl}.log 2>&1 || tail -3 ${f%.jsonl}.log >> $S
      echo "loader r$r $side ${g}g: $(steady $f)" >> $S
    done
  done
done
echo "loader done at $((SECONDS-t0)) s" >> $S
for i in $(seq 1 ${IMDB:-0}); do
  log=$(timeout 200 build-gpu/loupe bench imdb_bilstm --gpus 1,2 --batch 1024 --precision fp16 2>&1)
  echo "$log" >> $O/imdb.log
  echo "imdb_bilstm $i: $(echo "$log" | grep -E '^ +[12] ' | awk '{printf "%s:%s %s | ", $1, $2, $4}')" >> $S
done
echo "done at $((SECONDS-t0)) s" >> $S
cat $S
