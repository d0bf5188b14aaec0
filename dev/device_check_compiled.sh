#!/usr/bin/env bash
# lab/plans/cuda_graphs.md's table on a GPU machine: loupe's fastest precision (fp32, tf32, fp16,
# bf16; the whole step one CUDA graph) against PyTorch's strongest mode without hand-written kernels
# (scripts/compare_pytorch.py --mode compiled: torch.compile + the whole step in a CUDA graph + fp16
# autocast), per model and batch, in one call on one GPU. Writes a markdown table to
# $OUT/compiled.md and the logs beside it.
#   MODELS="mnist_mlp mnist_cnn" BATCHES="128 1024" PRECISIONS=fp16,bf16 dev/device_check_compiled.sh
# loupe: `loupe bench --rounds 2` (alternating rounds, the fastest kept; at least 100 steps and 2 s
# each); PyTorch: the fastest of 3 epochs after its compilation and warm-up. The two sides
# alternate per model, so that the host's drift spreads over both. All 12 rows take longer than
# one 10-minute device call (torch.compile takes 20-60 s a model and batch): split by MODELS.
set -u
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
mkdir -p "$O"
[ -f "$O/compiled.md" ] || {
  echo "| model | batch | loupe best (precision) | PyTorch compiled + graph + fp16 | ratio |"
  echo "|---|---|---|---|---|"
} > "$O/compiled.md"
best() {  # the fastest precision of a loupe bench CSV for model, batch: "samples_per_sec precision"
  python3 - "$1" "$2" "$3" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["model"] == sys.argv[2] and r["batch"] == sys.argv[3]]
r = max(rows, key=lambda r: float(r["samples_per_sec"]))
print(round(float(r["samples_per_sec"])), r["precision"])
EOF
}
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm imdb_fasttext char_lstm}; do
  B=${BATCHES:-128 1024}
  for b in $B; do
    timeout 300 python3 scripts/compare_pytorch.py --model $m --batch $b --epochs 3 --mode compiled \
      > "$O/torch-$m-$b.log" 2>&1 || tail -3 "$O/torch-$m-$b.log"
  done
  $L bench $m --batch "$(echo $B | tr ' ' ',')" --precision ${PRECISIONS:-fp32,tf32,fp16,bf16} --rounds 2 --warmup 20 --no-nvml \
    --csv "$O/bench-$m.csv" > "$O/bench-$m.log" 2>&1 || tail -3 "$O/bench-$m.log"
  for b in $B; do
    t=$(grep -oE "[0-9,]+ samples/s \(best epoch\)" "$O/torch-$m-$b.log" | tail -1 | grep -oE "^[0-9,]+" | tr -d ,)
    read -r l p <<< "$(best "$O/bench-$m.csv" $m $b)"
    row=$(python3 -c "l, t = $l, ${t:-0}; print(f'| $m | $b | {l:,} ($p) | {t:,} | ' + (f'{l / t:.2f}x' if t else 'n/a') + ' |')")
    echo "$row" | tee -a "$O/compiled.md"
  done
done
