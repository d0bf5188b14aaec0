#!/usr/bin/env bash
# Two-GPU A/B on the device: this tree (build-gpu) against the tree in .base (a git worktree of an
# earlier commit, carried), `loupe bench MODEL --gpus 1,2` alternating base / this tree / this tree
# under each of CONFIGS (NAME=VAR=VALUE[,VAR=VALUE...], space-separated). SUITES (a list of ctest
# labels, e.g. "^gpu$ multigpu") runs those suites on this tree first. MODELS (imdb_bilstm): each
# in turn. One summary line per bench; the benches' output in bench.log.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
(SOURCE=.base BUILD=build-base TARGET=loupe_cli dev/gpu_configure.sh "$O/base.log") &
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
wait
for label in ${SUITES:-}; do
  LOUPE_DATA=$PWD/.devdata ctest --test-dir build-gpu -L "$label" --output-on-failure > "$O/ctest-${label//[^a-z]/}.log" 2>&1
  grep -E 'tests passed|tests failed|\(Failed\)' "$O/ctest-${label//[^a-z]/}.log"
done
for MODEL in ${MODELS:-imdb_bilstm}; do
for r in $(seq 1 "${ROUNDS:-3}"); do
  for c in base=base new= ${CONFIGS:-}; do
    name=${c%%=*}; vars=${c#*=}; exe=build-gpu/loupe
    [ "$vars" = base ] && { exe=build-base/loupe; vars=; }
    log=$(env $(echo "$vars" | tr ',' ' ') timeout 200 $exe bench "$MODEL" --gpus 1,2 --batch 1024 --precision fp16 2>&1)
    echo "== $name round $r" >> "$O/bench.log"; echo "$log" >> "$O/bench.log"
    echo "$MODEL $name r$r: $(echo "$log" | grep -E '^ +2 ' | awk '{print $2, $4, $5, $6}') | one GPU $(echo "$log" | grep -E '^ +1 ' | awk '{print $2}')"
  done
done
done
