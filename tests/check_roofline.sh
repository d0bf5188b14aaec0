#!/usr/bin/env bash
# CTest roofline_cli / roofline_gpu: `loupe roofline` through the command at small sizes (one of
# them not a multiple of 4): every implementation that should be there is, each agrees with the
# float64 reference (max relative error under 1e-5), and the CSV and the PNG are written.
# Speed is not checked here (benchmarks run on the device; docs/benchmarks.md).
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
[ "$(head -c 4 "$T/r.png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || fail "no PNG written"
echo "check_roofline ($mode): ok"
