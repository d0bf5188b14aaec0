#!/usr/bin/env bash
# lab/plans/data_parallel.md on a two-GPU host: the GPU suites, then the data-parallel targets on
# real Fashion-MNIST through the loader. Parts by PARTS (default: all), logs and a summary in $OUT.
#   tests     ctest -L '^gpu$' and ctest -L multigpu (LOUPE_DATA=D's parent, which holds fashion-mnist/)
#   accuracy  mnist_cnn, 12 epochs (the recipe): --gpus 2 --batch 64 against one GPU at --batch 128
#   loader    mnist_cnn fp16 through the loader at 1024 per GPU: one GPU and two, two rounds each,
#             alternating; samples/s = median of epochs 2.. (epoch 1 captures the graph)
#   launchers ctest -R check_launchers alone (bench --gpus, torchrun, the timeline, Ctrl-C)
#   pytorch   scripts/links_study.py --pytorch --pytorch-mode compiled over NVLink: cifar10_cnn and
#             imdb_bilstm, fp16, 1024 per GPU (loupe and PyTorch DDP in the same call)
#   steps     imdb_bilstm resident fp16 at 1024 per GPU, one GPU and two (and two with --busy): the
#             step p50 and NCCL's shares, to tell a per-step cost from a per-epoch one
# Needs build-gpu/ built and D=$LOUPE_DATA (default .devdata/fashion-mnist).
set -u
export NCCL_NVLS_ENABLE=0
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
D=${LOUPE_DATA:-$PWD/.devdata/fashion-mnist}
mkdir -p "$O"
S="$O/summary.txt"
has() { [[ " ${PARTS:-tests accuracy loader} " == *" $1 "* ]]; }
steady() {  # rank 0's samples/s, median of epochs 2..: world_samples_per_sec on several GPUs
  python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v = [r.get("world_samples_per_sec") or r["samples_per_sec"] for r in recs if r.get("rank", 0) == 0 and r["epoch"] >= 2]
print(round(statistics.median(v)) if v else 0)
PY
}
final_acc() { python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; r=[x for x in r if x.get('rank',0)==0]; print(f\"{100*r[-1]['test_acc']:.2f}\")" "$1"; }
if has tests; then
  LOUPE_DATA=$(dirname "$D") ctest --test-dir build-gpu -L '^gpu$' --output-on-failure > "$O/ctest-gpu.log" 2>&1
  grep -E 'tests passed|tests failed|Total Test' "$O/ctest-gpu.log" | sed 's/^/gpu: /' >> "$S"
  LOUPE_DATA=$(dirname "$D") ctest --test-dir build-gpu -L multigpu --output-on-failure > "$O/ctest-multigpu.log" 2>&1
  grep -E 'tests passed|tests failed|Total Test' "$O/ctest-multigpu.log" | sed 's/^/multigpu: /' >> "$S"
fi
if has accuracy; then
  rm -f "$O"/acc-*.jsonl
  ( time $L train mnist_cnn --data "$D" --gpus 2 --batch 64 --plain --metrics "$O/acc-2gpu.jsonl" ) > "$O/acc-2gpu.log" 2>&1
  ( time $L train mnist_cnn --data "$D" --batch 128 --plain --metrics "$O/acc-1gpu.jsonl" ) > "$O/acc-1gpu.log" 2>&1
  echo "accuracy: mnist_cnn 12 epochs, 2 GPUs x 64: $(final_acc "$O/acc-2gpu.jsonl")%  1 GPU x 128: $(final_acc "$O/acc-1gpu.jsonl")%" >> "$S"
fi
if has loader; then
  for round in 1 2; do
    for g in 1 2; do
      f="$O/loader-${g}gpu-r$round.jsonl"; rm -f "$f"
      $L train mnist_cnn --data "$D" --gpus $g --batch 1024 --precision fp16 --epochs 4 --plain --metrics "$f" \
        > "${f%.jsonl}.log" 2>&1 || tail -3 "${f%.jsonl}.log" >> "$S"
      echo "loader fp16 1024/GPU round $round, $g GPU(s): $(steady "$f") samples/s" >> "$S"
    done
  done
fi
if has launchers; then
  ctest --test-dir build-gpu -R check_launchers --output-on-failure > "$O/ctest-launchers.log" 2>&1
  grep -E 'tests passed|tests failed' "$O/ctest-launchers.log" | sed 's/^/launchers: /' >> "$S"
fi
if has pytorch; then
  timeout "${PT_TIMEOUT:-420}" python3 scripts/links_study.py --loupe build-gpu/loupe --models ${MODELS:-cifar10_cnn,imdb_bilstm} \
    --batch 1024 --precision fp16 --epochs 4 --transports nvlink --pytorch --pytorch-mode compiled \
    --out /tmp/links-pt > "$O/links-pt.log" 2>&1
  cp /tmp/links-pt/links.md "$O/links-pt.md"; cat /tmp/links-pt/links.md >> "$S"
fi
if has steps; then
  for m in ${STEP_MODELS:-imdb_bilstm cifar10_cnn}; do
    for run in "1 -" "2 -" "2 - --busy" "2 1" "2 4"; do
      set -- $run; g=$1; mb=$2; shift 2; f="/tmp/steps-$m-$g-$mb$*.jsonl"; rm -f "$f"
      if [ "$mb" = "-" ]; then unset LOUPE_DDP_BUCKET_MB; else export LOUPE_DDP_BUCKET_MB=$mb; fi
      $L train $m --synthetic --resident --gpus $g "$@" --batch 1024 --precision fp16 --epochs 6 --plain \
        --metrics "$f" > "$O/steps.log" 2>&1 || tail -3 "$O/steps.log" >> "$S"
      unset LOUPE_DDP_BUCKET_MB
      python3 dev/steps_summary.py "$f" "$m gpus $g bucket_mb $mb $*" >> "$S"
    done
  done
fi
cat "$S"
