#!/usr/bin/env bash
# A host of 4 or 8 GPUs (docs/multi-gpu.md): the scaling curve. Parts by PARTS (default: build bench
# loader), logs and a summary in $OUT (summary.txt, then the logs in one tarball: $OUT returns few
# files).
#   build     dev/gpu_configure.sh (build-gpu/, Release, sm_90)
#   bench     loupe bench MODEL --gpus SIZES --batch 1024 --precision fp16 for each of MODELS
#   loader    mnist_cnn fp16 at 1024 per GPU through the loader on real Fashion-MNIST, each size of
#             SIZES in turn, ROUNDS rounds alternating; samples/s = median of epochs 2..
#   tests     ctest -L multigpu (worlds of 2 and of every GPU), LOUPE_DATA=.devdata, cut off at DEADLINE
#             seconds into the script (570)
#   pytorch   scripts/links_study.py over NVLink at SIZES with PyTorch DDP (torch.compile + autocast
#             fp16, torchrun) beside loupe, PT_MODELS, in the same call
#   steps     STEP_MODELS (mnist_mlp) resident at each size, with and without --busy: step p50 and
#             p95 (the host's, under CUDA graphs), and the epoch's training time over its steps
#   levers    LEVER_MODELS at the largest size: the default, then each of LEVERS (NAME=VAR=VALUE or
#             NAME=--flag=VALUE, space-separated), one bench row per lever; LEVER_ROUNDS rounds (1),
#             alternating
# SIZES defaults to 1,2,...,every GPU of the host (powers of two).
set -u
export NCCL_NVLS_ENABLE=0
L=./build-gpu/loupe
O=${OUT:-/tmp/out}; mkdir -p "$O"
S="$O/summary.txt"
D=${LOUPE_DATA:-$PWD/.devdata/fashion-mnist}
n=$(nvidia-smi -L | grep -c '^GPU')
if [ -z "${SIZES:-}" ]; then SIZES=1; for g in 2 4 8; do [ "$g" -le "$n" ] && SIZES+=",$g"; done; fi
largest=${SIZES##*,}
has() { [[ " ${PARTS:-build bench loader} " == *" $1 "* ]]; }
echo "host: $n GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), sizes $SIZES, $(date -u +%F)" >> "$S"
nvidia-smi topo -m > "$O/topo.txt" 2>&1
if has build; then
  t0=$SECONDS; dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log" >> "$S"; cat "$S"; exit 1; }
  echo "build: $((SECONDS - t0)) s" >> "$S"
fi
if has bench; then
  for m in ${MODELS:-cifar10_cnn imdb_bilstm mnist_cnn mnist_mlp}; do
    timeout 300 $L bench "$m" --gpus "$SIZES" --batch 1024 --precision fp16 --json "$O/bench-$m.jsonl" > "$O/bench-$m.txt" 2>&1 ||
      tail -3 "$O/bench-$m.txt" >> "$S"
    grep -E '^ +[0-9]+ ' "$O/bench-$m.txt" | sed "s/^/bench $m: /" >> "$S"
  done
fi
steady() {  # rank 0's samples/s, median of epochs 2..
  python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v = [r.get("world_samples_per_sec") or r["samples_per_sec"] for r in recs if r.get("rank", 0) == 0 and r["epoch"] >= 2]
print(round(statistics.median(v)) if v else 0)
PY
}
if has loader; then
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for g in ${SIZES//,/ }; do
      f="$O/loader-${g}gpu-r$round.jsonl"; rm -f "$f"
      timeout 200 $L train mnist_cnn --data "$D" --gpus $g --batch 1024 --precision fp16 --epochs 6 --plain --metrics "$f" \
        > "${f%.jsonl}.log" 2>&1 || tail -3 "${f%.jsonl}.log" >> "$S"
      echo "loader mnist_cnn fp16 1024/GPU round $round, $g GPU(s): $(steady "$f") samples/s" >> "$S"
    done
  done
fi
if has tests; then  # bounded, so that the parts after it still report within the call (DEADLINE s)
  LOUPE_DATA=$PWD/.devdata timeout -k 10 $(( ${TESTS_DEADLINE:-${DEADLINE:-570}} - SECONDS )) ctest --test-dir build-gpu \
    -L multigpu -V > "$O/ctest-multigpu.log" 2>&1 || echo "multigpu: ctest exit $?" >> "$S"
  # the worlds past two that ran (their lines, every test's output being kept with -V)
  grep -E "world [3-8] at batch|== 8\.|slowest rank [3-7]:|Test +#|Passed|Failed" "$O/ctest-multigpu.log" | cut -c1-220 |
    sed 's/^/multigpu: /' >> "$S"
  grep -E 'tests passed|tests failed|Total Test' "$O/ctest-multigpu.log" | sed 's/^/multigpu: /' >> "$S"
fi
if has steps; then  # per size: dev/steps_summary.py
  for m in ${STEP_MODELS:-mnist_mlp}; do
    for g in ${SIZES//,/ }; do
      for busy in "" --busy; do
        f="/tmp/steps-$m-$g$busy.jsonl"; rm -f "$f"
        timeout 120 $L train $m --synthetic --resident --gpus $g $busy --batch 1024 --precision fp16 --epochs 6 --plain \
          --metrics "$f" > "$O/steps-$m-$g$busy.log" 2>&1 || tail -3 "$O/steps-$m-$g$busy.log" >> "$S"
        python3 dev/steps_summary.py "$f" "$m gpus $g $busy" >> "$S"
      done
    done
  done
fi
if has pytorch; then
  timeout "${PT_TIMEOUT:-$(( ${DEADLINE:-570} - SECONDS - ${PT_LEAVE:-0} ))}" python3 scripts/links_study.py --loupe "$L" --models "${PT_MODELS:-cifar10_cnn,imdb_bilstm}" \
    --gpus "${SIZES#1,}" --batch 1024 --precision fp16 --epochs "${PT_EPOCHS:-3}" --transports nvlink --pytorch \
    --pytorch-mode compiled --out /tmp/links-pt > "$O/links-pt.log" 2>&1
  cp /tmp/links-pt/links.csv "$O/links-pt.csv" 2>/dev/null
  cat /tmp/links-pt/links.md >> "$S" 2>/dev/null || tail -5 "$O/links-pt.log" >> "$S"
fi
if has levers; then
  for r in $(seq 1 "${LEVER_ROUNDS:-1}"); do
  for m in ${LEVER_MODELS:-imdb_bilstm}; do
    for lever in default= ${LEVERS:-}; do
      [ $SECONDS -lt $(( ${DEADLINE:-570} - 40 )) ] || { echo "lever $m ${lever%%=*}: not run (deadline)" >> "$S"; continue; }
      name=${lever%%=*}; spec=${lever#*=}; vars=() flags=()
      case "$spec" in --*) flags=("${spec%%=*}" "${spec#*=}") ;; ?*) vars=("$spec") ;; esac
      batch=1024; [ "${flags[0]:-}" = --batch ] && { batch=${flags[1]}; flags=(); }
      log=$(env "${vars[@]}" timeout 200 $L bench "$m" --gpus "1,$largest" --batch "$batch" --precision fp16 "${flags[@]}" 2>&1)
      echo "== $m $name" >> "$O/levers.log"; echo "$log" >> "$O/levers.log"
      echo "lever $m $name r$r: $(echo "$log" | grep -E "^ +$largest " | awk '{print $2, $4, $5, $6, $7, $8}') | one GPU $(echo "$log" | grep -E '^ +1 ' | awk '{print $2}')" >> "$S"
    done
  done
  done
fi
cat "$S"
cd "$O" && tar czf "logs-${PARTS// /-}.tgz" --exclude='*.tgz' --exclude=summary.txt . 2>/dev/null
find . -maxdepth 1 -type f ! -name '*.tgz' ! -name summary.txt ! -name '*.csv' -delete; true
