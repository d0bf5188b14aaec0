#!/usr/bin/env bash
# Checks on a GPU machine (logs under $OUT): loupe against PyTorch eager fp32 on the text
# models (synthetic ids resident on the GPU, as compare_pytorch.py trains) at the reference batch
# and at 1024, best of ROUNDS alternating rounds; then char_lstm on the GPL-3 text and a sample.
# By default strict fp32 on both sides; PREC=tf32 compares loupe --precision tf32 with PyTorch's
# default (TF32 in cuDNN, so in its LSTM; strict fp32 in its GEMMs).
#   MODELS="imdb_bilstm imdb_fasttext char_lstm" ROUNDS=1 PREC=fp32 dev/device_check_text.sh
set -u
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
mkdir -p "$O"
med() { python3 -c "import json,statistics; r=[json.loads(l) for l in open('$1')][1:]; print(round(statistics.median(x['samples_per_sec'] for x in r)))"; }
best() { python3 -c "import sys; print(max(int(v) for v in sys.argv[1:] if v))" "$@"; }
PREC=${PREC:-fp32}
TORCH_FLAGS=$([ "$PREC" = fp32 ] && echo --no-tf32)
torch_sps() { python3 scripts/compare_pytorch.py --model $1 --batch $2 --epochs 2 $TORCH_FLAGS 2>&1 | tail -1 | grep -oE "[0-9,]+ samples/s" | tr -d ', samples/'; }
declare -A REF=([imdb_bilstm]=32 [imdb_fasttext]=32 [char_lstm]=128)
for m in ${MODELS:-imdb_bilstm imdb_fasttext char_lstm}; do
  for b in ${REF[$m]} 1024; do
    l=0; t=0
    for r in $(seq ${ROUNDS:-1}); do
      rm -f "$O/$m-$b.jsonl"  # --metrics appends: one run per file
      $L train $m --synthetic --resident --batch $b --epochs 3 --precision $PREC --plain --no-nvml --metrics "$O/$m-$b.jsonl" > "$O/$m-$b.log" 2>&1 || tail -3 "$O/$m-$b.log"
      l=$(best $l $(med "$O/$m-$b.jsonl")); t=$(best $t $(torch_sps $m $b))
    done
    python3 -c "print(f'$m batch $b ($PREC): loupe {$l:,} samples/s, pytorch eager {\"default\" if \"$PREC\"==\"tf32\" else \"strict fp32\"} {$t:,} -> {$l/$t:.2f}x')"
  done
done
TXT=${GPL3:-/usr/share/common-licenses/GPL-3}
[ -f "$TXT" ] || TXT=.data/GPL-3  # a copy carried to a machine without it
if [ -f "$TXT" ] && [ -z "${SKIP_CHAR:-}" ]; then
  $L train char_lstm --device cuda --data "$TXT" --plain --save "$O/char.ckpt" > "$O/char_gpl3.log" 2>&1
  grep -E "^epoch|done" "$O/char_gpl3.log" | cut -c1-100
  $L generate char_lstm --device cuda --data "$TXT" --checkpoint "$O/char.ckpt" --prompt "you may convey " --length 400 --temperature 0.5 | tee "$O/char_sample.txt"
fi
