#!/usr/bin/env bash
# CTest roofline_cli / roofline_gpu: `loupe roofline` through the command at small sizes (one of
# them not a multiple of 4): every implementation that should be there is, each agrees with the
# float64 reference (max relative error under 1e-5), and the CSV and the PNG are written.
# Speed is not checked here (benchmarks run on the device; lab/benchmarks.md).
#   check_roofline.sh LOUPE_BINARY cpu|gpu      (gpu: exit 77, a skip, only in a CPU-only build or
#   where nvidia-smi lists no GPU; with a GPU every failure, a crash included, is a failure)
set -uo pipefail
L=${1:?usage: check_roofline.sh LOUPE_BINARY cpu|gpu}
mode=${2:-cpu}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ "$mode" = gpu ]; then
  args=(--sizes 1024,300)
  # Whether there is a GPU is decided before the run, never from how the run failed: a loupe
  # that dies with an illegal memory access must not read as "no GPU here".
  if ! "$L" --version | grep -q "^CUDA: on"; then echo "SKIP: a CPU-only build"; exit 77; fi
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
  if [ "${gpus:-0}" -lt 1 ]; then echo "SKIP: nvidia-smi lists no GPU"; exit 77; fi
  impls="cublas_sgemv gpu_naive gpu_ours cpu_1thread cpu_threads"
else
  args=(--device cpu --sizes 128,300)
  impls="cpu_1thread cpu_threads"
fi
"$L" roofline "${args[@]}" --min-seconds 0.01 --csv "$T/r.csv" --png "$T/r.png" > "$T/out" 2>&1 || { cat "$T/out"; fail "loupe roofline exited non-zero"; }
cat "$T/out"
head -1 "$T/r.csv" | grep -q "^device_name,impl,n,seconds,gflops,bytes_per_s,roofline_fraction,bandwidth_bytes_per_s,peak_gflops,max_rel_error$" \
  || fail "unexpected CSV header: $(head -1 "$T/r.csv")"
for impl in $impls; do
  for n in $(echo "${args[-1]}" | tr , ' '); do
    grep -q ",$impl,$n," "$T/r.csv" || fail "no row for $impl at n=$n"
  done
done
# Every row: a positive rate and the float64 reference matched.
awk -F, 'NR > 1 && !($5 > 0 && $10 < 1e-5) { print "FAIL: row " NR ": " $0; bad = 1 } END { exit bad }' "$T/r.csv" || exit 1
# Every row's fraction is its rate over its device's roof; the CPU rows share one roof, the read
# stream the yardstick line prints (GB/s, rounded).
awk -F, 'NR > 1 { f = $6 / $8; if (f - $7 > 1e-6 * f || $7 - f > 1e-6 * f) { print "FAIL: fraction " $7 " is not " f ": " $0; bad = 1 } }
         NR > 1 && $2 ~ /^cpu_/ { if (bw == "") bw = $8; else if ($8 != bw) { print "FAIL: CPU rows with two roofs"; bad = 1 } }
         END { exit bad }' "$T/r.csv" || exit 1
cpu_bw=$(awk -F, 'NR > 1 && $2 ~ /^cpu_/ { printf "%.0f", $8 / 1e9; exit }' "$T/r.csv")
grep -q "^CPU ([0-9]* threads): read bandwidth $cpu_bw GB/s (a load stream past the last-level cache)" "$T/out" \
  || fail "the CPU rows' roof ($cpu_bw GB/s) is not the read stream printed"
# n = 300 (360,000 bytes; in both modes' sizes) is in any last-level cache: marked, and the mark
# explained.
if [ "$(getconf LEVEL3_CACHE_SIZE 2>/dev/null || echo 0)" -gt 360000 ]; then
  grep -Eq "^cpu_threads +300 .*%\* " "$T/out" || fail "n=300 not marked as in cache"
  grep -q "^\* A (4n^2 bytes) fits in the CPU's .* last-level cache" "$T/out" || fail "no note for the cache mark"
fi
[ "$(head -c 4 "$T/r.png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || fail "no PNG written"
echo "check_roofline ($mode): ok"
