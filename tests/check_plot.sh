#!/usr/bin/env bash
# CTest plot_sweep: tools/plot_sweep.py draws the sample sweeps (GPU and CPU) into real PNGs and
# refuses a CSV without samples_per_sec with exit status 2. Usage: check_plot.sh SOURCE_DIR
# tests/data/sweep_sample.csv is a fixture: invented GPU figures written by loupe's own CsvWriter
# (the real format), not a measurement; sweep_sample_cpu.csv holds real CPU runs.
set -uo pipefail
src=${1:?usage: check_plot.sh SOURCE_DIR}
script="$src/tools/plot_sweep.py"

# Debian's python3-matplotlib installs for /usr/bin/python3, which may not be the python3 on PATH.
py=""
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" > /dev/null && "$cand" -c "import matplotlib" 2> /dev/null; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "FAIL: no python3 with matplotlib (tried /usr/bin/python3 and python3 on PATH);" \
       "install python3-matplotlib (tools/setup.sh installs it)"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for name in sweep_sample sweep_sample_cpu; do
  png="$tmp/$name.png"
  if ! "$py" "$script" "$src/tests/data/$name.csv" "$png"; then
    fail "$name: plot_sweep.py exited non-zero"
    continue
  fi
  [ "$(head -c 4 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || fail "$name: output is not a PNG"
  size=$(stat -c %s "$png")
  [ "$size" -gt 20000 ] || fail "$name: PNG is only $size bytes (expected over 20 kB)"
done

# A CSV without the samples_per_sec column: exit 2 with a message, and no PNG.
sed '1s/,samples_per_sec,/,throughput,/' "$src/tests/data/sweep_sample.csv" > "$tmp/no_sps.csv"
"$py" "$script" "$tmp/no_sps.csv" "$tmp/no_sps.png" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "CSV without samples_per_sec: exit $rc, expected 2"
grep -q samples_per_sec "$tmp/err" || fail "CSV without samples_per_sec: message does not name it: $(cat "$tmp/err")"
[ ! -e "$tmp/no_sps.png" ] || fail "CSV without samples_per_sec: a PNG was written anyway"

if [ "$fails" -ne 0 ]; then
  echo "check_plot: $fails failure(s)"
  exit 1
fi
echo "check_plot: ok ($py)"
