#!/usr/bin/env bash
# CTest plot_sweep / plot_roofline / plot_timeline / plot_compare / plot_profile: a plotting script draws sample
# CSVs into real PNGs and refuses a CSV without a required column with exit status 2, a message
# naming it and no PNG.
#   check_plot.sh [--skip-without-matplotlib] [--expect FIXTURE TEXT]... SOURCE_DIR SCRIPT COLUMN FIXTURE...
# --expect: the script's output for FIXTURE must hold TEXT (the panels it says it drew: a CPU run's
# own panels, not empty GPU ones).
# (fixtures: names under tests/data, no .csv). Without matplotlib it fails, or with
# --skip-without-matplotlib exits 77 (CTest's SKIP_RETURN_CODE) saying why.
# The fixtures are in loupe's own CSV formats. sweep_sample.csv holds invented GPU figures (written
# by loupe's CsvWriter, not a measurement), sweep_sample_cpu.csv real CPU runs;
# roofline_sample.csv and roofline_sample_cpu.csv hold invented figures in `loupe roofline`'s format.
# timeline_sample.csv holds invented GPU samples (three epochs) in `loupe train --timeline`'s format,
# timeline_sample_marks_only.csv a real CPU run's (marks only). compare_sample.csv and
# compare_sample_groups.csv were written by `loupe compare --csv` from hand-written JSONL with
# invented H100/H200 figures (one group per run; two models per run, as from bench --json).
# profile_sample.csv is a real `loupe profile cifar10_cnn --counters` on an H100 (2026-11-24),
# profile_sample_cpu.csv a real CPU run of mnist_mlp. cpu_scaling_sample.csv and cpu_gpu_sample.csv
# are scripts/cpu_study.py's real runs on the GPU host (lab/results/cpu-2026-11-24b).
# compare_sample_cpu.csv is `loupe compare --csv` of two real CPU `loupe bench --json` runs
# (mnist_mlp and mnist_cnn, --threads 1 and 2, on a 2-core machine under load, 2026-11-26).
set -uo pipefail
skip_without=0
if [ "${1:-}" = --skip-without-matplotlib ]; then
  skip_without=1
  shift
fi
declare -A expect
while [ "${1:-}" = --expect ]; do
  expect[$2]=$3
  shift 3
done
src=${1:?usage: check_plot.sh SOURCE_DIR SCRIPT COLUMN FIXTURE...}
name=${2:?usage: check_plot.sh SOURCE_DIR SCRIPT COLUMN FIXTURE...}
column=${3:?usage: check_plot.sh SOURCE_DIR SCRIPT COLUMN FIXTURE...}
shift 3
[ $# -gt 0 ] || { echo "usage: check_plot.sh SOURCE_DIR SCRIPT COLUMN FIXTURE..."; exit 1; }
script="$src/scripts/$name"

# Debian's python3-matplotlib installs for /usr/bin/python3, which may not be the python3 on PATH.
py=""
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" > /dev/null && "$cand" -c "import matplotlib" 2> /dev/null; then
    py=$cand
    break
  fi
done
# Under LOUPE_TEST_REQUIRE=cpu (CI, where tools/setup.sh installed matplotlib) no skip: the failure below.
if [ -z "$py" ] && [ "$skip_without" -eq 1 ] && [ "${LOUPE_TEST_REQUIRE:-}" != cpu ]; then
  echo "SKIP: no python3 with matplotlib (tried /usr/bin/python3 and python3 on PATH)"
  exit 77
fi
if [ -z "$py" ]; then
  echo "FAIL: no python3 with matplotlib (tried /usr/bin/python3 and python3 on PATH);" \
       "install python3-matplotlib (tools/setup.sh installs it)"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for fixture in "$@"; do
  png="$tmp/$fixture.png"
  if ! "$py" "$script" "$src/tests/data/$fixture.csv" "$png" > "$tmp/out"; then
    cat "$tmp/out"
    fail "$fixture: $name exited non-zero"
    continue
  fi
  cat "$tmp/out"
  if [ -n "${expect[$fixture]:-}" ] && ! grep -qF -- "${expect[$fixture]}" "$tmp/out"; then
    fail "$fixture: the output does not say '${expect[$fixture]}'"
  fi
  [ "$(head -c 4 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || fail "$fixture: output is not a PNG"
  size=$(stat -c %s "$png")
  [ "$size" -gt 20000 ] || fail "$fixture: PNG is only $size bytes (expected over 20 kB)"
done

# The first fixture without the column: exit 2 with a message naming it, and no PNG.
sed "1s/,$column,/,renamed_$column,/" "$src/tests/data/$1.csv" > "$tmp/missing.csv"
"$py" "$script" "$tmp/missing.csv" "$tmp/missing.png" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "CSV without $column: exit $rc, expected 2"
grep -q "$column" "$tmp/err" || fail "CSV without $column: message does not name it: $(cat "$tmp/err")"
[ ! -e "$tmp/missing.png" ] || fail "CSV without $column: a PNG was written anyway"

if [ "$fails" -ne 0 ]; then
  echo "check_plot ($name): $fails failure(s)"
  exit 1
fi
echo "check_plot ($name): ok ($py)"
