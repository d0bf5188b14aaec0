#!/usr/bin/env bash
# Issue 35 point 1 on one GPU: the GPU suite, then the graphed profile of each model and --busy's
# boundary share in bench records.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; S=$O/summary.txt; t0=$SECONDS
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
echo "built at $((SECONDS-t0)) s" >> $S; nvidia-smi --query-gpu=name --format=csv,noheader >> $S
if [ "${TESTS:-1}" = 1 ]; then
  LOUPE_DATA=$PWD/.devdata ctest --test-dir build-gpu -L '^gpu$' --output-on-failure > "$O/ctest-gpu.log" 2>&1
  grep -E 'tests passed|tests failed|Total Test|\(Failed\)' "$O/ctest-gpu.log" >> $S
fi
mkdir -p /tmp/gp
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm imdb_fasttext char_lstm}; do
  for g in on off; do
    timeout 120 build-gpu/loupe profile $m --synthetic --resident --precision fp16 --graph $g --profile-steps 10:19 \
      --csv /tmp/gp/$m-$g.csv --json /tmp/gp/$m-$g.json --png /tmp/gp/$m-$g.png > /tmp/gp/$m-$g.txt 2>&1
    echo "== $m --graph $g (rc $?)" >> $S
    grep -E "^(window|step |note)" /tmp/gp/$m-$g.txt | cut -c1-260 >> $S
  done
done
for b in 128 1024; do
  timeout 200 build-gpu/loupe bench mnist_mlp,mnist_cnn,cifar10_cnn,imdb_bilstm,imdb_fasttext,char_lstm --batch $b \
    --precision fp16 --busy --json /tmp/gp/bench-$b.jsonl > /tmp/gp/bench-$b.txt 2>&1
  python3 - /tmp/gp/bench-$b.jsonl >> $S <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"bench {r['model']:14s} b{r['batch']:5d} {r['samples_per_sec']:>12,.0f}/s busy {r.get('gpu_busy_share') or 0:.3f} "
          f"boundary {r.get('gpu_boundary_share') or 0:.3f} kernels/step {r.get('gpu_kernels_per_step') or 0:.1f} "
          f"graph kernels {r.get('graph_kernels')}")
PY
done
(cd /tmp/gp && tar czf "$O/gp.tgz" .)
echo "done at $((SECONDS-t0)) s" >> $S
cat $S
