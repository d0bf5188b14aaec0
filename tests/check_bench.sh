#!/usr/bin/env bash
# loupe bench and loupe sweep on the CPU, as a user runs them: the table, the JSONL and CSV records
# (GPU-only figures null or empty, never 0), the sweep's plot, and the errors for bad requests.
#   tests/check_bench.sh BUILD_DIR
set -u
L=$1/loupe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "check_bench: FAIL: $*" >&2; exit 1; }

$L bench mnist_mlp --device cpu --batch 16,32 --steps 3 --warmup 1 --json "$T/b.jsonl" --csv "$T/b.csv" > "$T/out" 2>&1 \
  || { cat "$T/out"; fail "loupe bench exited non-zero"; }
cat "$T/out"
# On the CPU the table shows the CPU's own figures, not the GPU's columns as n/a: threads, cores
# used, the share of ready time spent waiting for a core (n/a without schedstats), GFLOP/s, peak RSS.
grep -qE "^model +batch +prec +samples/s +ms/step +threads +cores +waited +GFLOP/s +peak RSS$" "$T/out" \
  || fail "no CPU table header (threads, cores, waited, GFLOP/s, peak RSS)"
grep -qE "busy%|util%|samples/J" "$T/out" && fail "the CPU table shows GPU columns"
[ "$(grep -cE '^mnist_mlp +(16|32) +fp32 ' "$T/out")" = 2 ] || fail "expected two table rows"
row='^mnist_mlp +(16|32) +fp32 +[0-9,]+ +[0-9]+\.[0-9]{3} +[1-9][0-9]* +[0-9]+\.[0-9] +([0-9]+%|n/a) +[0-9]+\.[0-9] +[1-9][0-9]* MiB$'
[ "$(grep -cE "$row" "$T/out")" = 2 ] || fail "a CPU row's cells are not threads, cores, waited, GFLOP/s, MiB"
[ "$(wc -l < "$T/b.jsonl")" = 2 ] || fail "expected two JSONL records"
grep -q '"gpu_util_mean":null' "$T/b.jsonl" || fail "a CPU run must write GPU utilisation as null"
[ "$(wc -l < "$T/b.csv")" = 3 ] || fail "expected a CSV header and two rows"
head -1 "$T/b.csv" | grep -q "samples_per_sec" || fail "CSV header lacks samples_per_sec"

# Rounds: each combination measured in turn, then the table of the fastest, and one record each.
$L bench mnist_mlp --device cpu --batch 16,32 --steps 2 --warmup 1 --rounds 2 --threads 1 --csv "$T/r.csv" > "$T/out" 2>&1 \
  || { cat "$T/out"; fail "loupe bench --rounds 2 exited non-zero"; }
# The threads column is the run's: --threads 1.
[ "$(grep -cE '^mnist_mlp +(16|32) +fp32 +[0-9,]+ +[0-9.]+ +1 ' "$T/out")" = 6 ] || { cat "$T/out"; fail "--threads 1 not in the threads column"; }
grep -q "^round 2 of 2" "$T/out" && grep -q "^fastest of 2 rounds" "$T/out" || { cat "$T/out"; fail "no rounds in the output"; }
[ "$(grep -cE '^mnist_mlp +(16|32) +fp32 ' "$T/out")" = 6 ] || { cat "$T/out"; fail "expected 2 rows per round and 2 fastest"; }
[ "$(wc -l < "$T/r.csv")" = 3 ] || fail "--rounds 2 must write one CSV row per combination"

$L bench mnist_mlp --device cpu --precision fp16 --batch 16 --steps 2 --warmup 1 > "$T/err" 2>&1 \
  || { cat "$T/err"; fail "bench lists an unsupported precision as skipped and goes on"; }
grep -q "skipped fp16: --precision fp16 is a GPU mode" "$T/err" || { cat "$T/err"; fail "fp16 on the CPU must be listed as skipped, saying why"; }
$L train mnist_mlp --device cpu --synthetic --precision bf16 --epochs 1 > "$T/err" 2>&1 && fail "bf16 on the CPU must be refused"
grep -q "GPU mode" "$T/err" || { cat "$T/err"; fail "the bf16 refusal does not say why"; }
$L bench no_such_model --device cpu > "$T/err" 2>&1 && fail "an unknown model must be refused"
grep -q "the models are" "$T/err" || { cat "$T/err"; fail "the unknown-model error does not list the models"; }
$L sweep mnist_mlp --device cpu > "$T/err" 2>&1 && fail "sweep without --batch must be refused"

$L sweep mnist_mlp --device cpu --batch 16,32 --steps 3 --warmup 1 --csv "$T/s.csv" --png "$T/s.png" > "$T/out" 2>&1 \
  || { cat "$T/out"; fail "loupe sweep exited non-zero"; }
cat "$T/out"
[ "$(wc -l < "$T/s.csv")" = 3 ] || fail "expected a sweep CSV with two rows"
grep -qE "^fastest: fp32 at batch (16|32), " "$T/out" || fail "the sweep does not name its fastest setting"
grep -qE "^fp32: batch 16 -> 32 multiplies samples/s by .*; GPU figures n/a; GFLOP/s [0-9.]+ -> [0-9.]+, cores used [0-9.]+ -> [0-9.]+$" "$T/out" \
  || fail "no per-precision summary line with the CPU's figures"
[ "$(head -c 4 "$T/s.png" | od -An -tx1 | tr -d ' ')" = "89504e47" ] || fail "the sweep did not write a PNG"
grep -q "panels: throughput, GFLOP/s, cores used, peak RSS" "$T/out" || fail "the CPU sweep's plot lacks the CPU's panels"
echo "check_bench: ok"
