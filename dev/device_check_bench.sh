#!/usr/bin/env bash
# On a GPU machine: `loupe bench` beside PyTorch in the same call, per model and batch:
# loupe fp32 against PyTorch eager strict fp32 and a CUDA-graphed step, loupe fp16 against
# PyTorch autocast fp16 + GradScaler. Writes a markdown table to $OUT/compare.md.
#   MODELS="mnist_mlp cifar10_cnn" BATCHES="128 1024" dev/device_check_bench.sh
# loupe: the faster of two rounds of at least 100 steps and 2 s; PyTorch: the fastest of 3 epochs
# (the first includes its warm-up). All six models at two batches take longer than one 10-minute
# device call: split them by MODELS.
set -u
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
mkdir -p "$O"
sps() { grep -oE "[0-9,]+ samples/s" | tail -1 | tr -d ', samples/'; }
col() {  # samples/s of a loupe bench CSV row: model, batch, precision
  python3 -c "import csv,sys; r=[x for x in csv.DictReader(open('$1')) if x['model']=='$2' and x['batch']=='$3' and x['precision']=='$4']; print(round(float(r[0]['samples_per_sec'])) if r else 0)"
}
ratio() { python3 -c "print(f'{$1/$2:.2f}x' if $2 else 'n/a')"; }
echo "| model, batch | loupe fp32 | PyTorch eager fp32 | ratio | PyTorch CUDA graph fp32 | ratio | loupe fp16 | PyTorch autocast fp16 | ratio |" > "$O/compare.md"
echo "|---|---|---|---|---|---|---|---|---|" >> "$O/compare.md"
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm imdb_fasttext char_lstm}; do
  for b in ${BATCHES:-128 1024}; do
    $L bench $m --batch $b --precision fp32,fp16 --rounds 2 --warmup 20 --no-nvml --csv "$O/bench-$m-$b.csv" > "$O/bench-$m-$b.log" 2>&1 \
      || tail -3 "$O/bench-$m-$b.log"
    l32=$(col "$O/bench-$m-$b.csv" $m $b fp32) l16=$(col "$O/bench-$m-$b.csv" $m $b fp16)
    t32=$(python3 scripts/compare_pytorch.py --model $m --batch $b --epochs 3 --no-tf32 2>&1 | tee "$O/torch-$m-$b-eager.log" | sps)
    tg=$(python3 scripts/compare_pytorch.py --model $m --batch $b --epochs 3 --no-tf32 --mode graph 2>&1 | tee "$O/torch-$m-$b-graph.log" | sps)
    t16=$(python3 scripts/compare_pytorch.py --model $m --batch $b --epochs 3 --mode amp 2>&1 | tee "$O/torch-$m-$b-amp.log" | sps)
    row="| $m, $b | $l32 | ${t32:-0} | $(ratio $l32 ${t32:-0}) | ${tg:-0} | $(ratio $l32 ${tg:-0}) | $l16 | ${t16:-0} | $(ratio $l16 ${t16:-0}) |"
    echo "$row" | tee -a "$O/compare.md"
  done
done
