#!/usr/bin/env bash
# Checks on a GPU machine (logs under $OUT): loupe against PyTorch eager on the CNNs
# (synthetic data resident on the GPU, as compare_pytorch.py trains), in the same call:
#   loupe fp32 vs PyTorch strict fp32 (--no-tf32)
#   loupe tf32 vs PyTorch's default (TF32 convolutions, fp32 GEMMs) and vs PyTorch all-TF32
# The device's host is shared and its speed drifts by up to 1.7x between minutes, so each side
# runs ROUNDS times (default 2), alternating, and the best of each is compared.
# With PROFILE=1 also where a step's GPU time goes (scripts/trace_summary.py).
#   MODELS="mnist_cnn cifar10_cnn" BATCHES="128 1024" EPOCHS=4 PROFILE=0 dev/device_check_cnn.sh
set -u
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
mkdir -p "$O"
med() { python3 -c "import json,statistics; r=[json.loads(l) for l in open('$1')][1:]; print(round(statistics.median(x['samples_per_sec'] for x in r)))"; }
torch_sps() { python3 scripts/compare_pytorch.py --model $1 --batch $2 --epochs 3 $3 2>&1 | tail -1 | grep -oE "[0-9,]+ samples/s" | tr -d ', samples/'; }
for m in ${MODELS:-mnist_cnn cifar10_cnn}; do
  for b in ${BATCHES:-128 1024}; do
    ep=${EPOCHS:-4}
    best() { python3 -c "import sys; print(max(int(v) for v in sys.argv[1:] if v))" "$@"; }
    lf=0; lt=0; lc=0; ts=0; td=0; ta=0
    for r in $(seq ${ROUNDS:-2}); do
      for p in fp32 tf32 "tf32 --channels-last"; do
        tag=$(echo $p | tr -d ' -')
        rm -f "$O/$m-$b-$tag.jsonl"  # --metrics appends: one run per file
        $L train $m --synthetic --resident --batch $b --epochs $ep --plain --no-nvml --precision $p \
          --metrics "$O/$m-$b-$tag.jsonl" > "$O/$m-$b-$tag.log" 2>&1
      done
      lf=$(best $lf $(med "$O/$m-$b-fp32.jsonl")); lt=$(best $lt $(med "$O/$m-$b-tf32.jsonl"))
      lc=$(best $lc $(med "$O/$m-$b-tf32channelslast.jsonl"))
      ts=$(best $ts $(torch_sps $m $b --no-tf32)); td=$(best $td $(torch_sps $m $b "")); ta=$(best $ta $(torch_sps $m $b --tf32))
    done
    python3 -c "
print(f'$m batch $b (samples/s; loupe: median of epochs 2-$ep, PyTorch: best of 3 epochs; best of ${ROUNDS:-2} rounds each)')
print(f'  fp32 strict: loupe {$lf:>9,}  pytorch {$ts:>9,}  ratio {$lf/$ts:.2f}x')
print(f'  tf32:        loupe {$lt:>9,}  pytorch default (tf32 conv) {$td:>9,}  ratio {$lt/$td:.2f}x;  pytorch all-tf32 {$ta:>9,}  ratio {$lt/$ta:.2f}x')
print(f'  tf32 + channels-last: loupe {$lc:>9,}  vs pytorch default {$lc/$td:.2f}x, vs pytorch all-tf32 {$lc/$ta:.2f}x')
print(f'  loupe fp32 vs pytorch default: {$lf/$td:.2f}x')"
    if [ "${PROFILE:-0}" = 1 ]; then
      for p in fp32 tf32 "tf32 --channels-last"; do
        tag=$(echo $p | tr -d ' -')
        $L train $m --synthetic --resident --batch $b --epochs 1 --max-steps 40 --plain --no-nvml --busy --precision $p \
          --profile-steps 20:39 --trace "$O/trace.json" > /dev/null 2>&1
        python3 scripts/trace_summary.py "$O/trace.json" --top 20 > "$O/prof-loupe-$m-$b-$tag.txt" 2>&1
        rm -f "$O/trace.json"
      done
    fi
  done
done
