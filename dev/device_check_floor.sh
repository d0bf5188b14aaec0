#!/usr/bin/env bash
# The floor table (lab/plans/toward_the_floor.md) on one GPU: the graphed profile of every
# reference model at batch 128 and 1024 (fp16; the JSON that scripts/floor_table.py reads), tarred
# into $OUT/floor.tgz with a summary of each step's line. PyTorch's compiled step comes from
# dev/device_check_compiled.sh in the same or the next call on the same machine (torch.compile takes
# 20-60 s a model and batch); then, here:
#   scripts/floor_table.py mnist_mlp@128=profile-mnist_mlp@128.json ... --pytorch mnist_mlp@128=SPS ...
#   MODELS="mnist_mlp mnist_cnn" BATCHES="128 1024" dev/device_check_floor.sh
set -u
O=${OUT:-/tmp/out}; W=$(mktemp -d); mkdir -p "$O"; S=$O/floor-summary.txt
[ -x build-gpu/loupe ] || dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >> "$S"
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm imdb_fasttext char_lstm}; do
  for b in ${BATCHES:-128 1024}; do
    timeout 150 build-gpu/loupe profile "$m" --synthetic --resident --precision fp16 --graph on --batch "$b" \
      --profile-steps 10:19 --json "$W/profile-$m@$b.json" --csv "$W/profile-$m@$b.csv" --png "$W/profile-$m@$b.png" \
      > "$W/profile-$m@$b.txt" 2>&1
    echo "== $m @ $b (rc $?)" >> "$S"
    grep -E "^step " "$W/profile-$m@$b.txt" | cut -c1-240 >> "$S"
  done
done
(cd "$W" && tar czf "$O/floor.tgz" .)
cat "$S"
