#!/usr/bin/env bash
# CTest plot_roofline: tools/plot_roofline.py draws the sample roofline CSVs (GPU+CPU and CPU only)
# into real PNGs and refuses a CSV without gflops with exit status 2.
# Usage: check_roofline_plot.sh SOURCE_DIR
# tests/data/roofline_sample.csv and roofline_sample_cpu.csv are fixtures in the format of
# `loupe roofline`: their figures (H200 and CPU bandwidths, peaks, timings) are invented, not a
# measurement.
set -uo pipefail
src=${1:?usage: check_roofline_plot.sh SOURCE_DIR}
script="$src/tools/plot_roofline.py"

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

for name in roofline_sample roofline_sample_cpu; do
  png="$tmp/$name.png"
  if ! "$py" "$script" "$src/tests/data/$name.csv" "$png"; then
    fail "$name: plot_roofline.py exited non-zero"
    continue
  fi
  [ "$(head -c 4 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || fail "$name: output is not a PNG"
  size=$(stat -c %s "$png")
  [ "$size" -gt 20000 ] || fail "$name: PNG is only $size bytes (expected over 20 kB)"
done

# A CSV without the gflops column: exit 2 with a message, and no PNG.
sed '1s/,gflops,/,rate,/' "$src/tests/data/roofline_sample.csv" > "$tmp/no_gflops.csv"
"$py" "$script" "$tmp/no_gflops.csv" "$tmp/no_gflops.png" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "CSV without gflops: exit $rc, expected 2"
grep -q gflops "$tmp/err" || fail "CSV without gflops: message does not name it: $(cat "$tmp/err")"
[ ! -e "$tmp/no_gflops.png" ] || fail "CSV without gflops: a PNG was written anyway"

if [ "$fails" -ne 0 ]; then
  echo "check_roofline_plot: $fails failure(s)"
  exit 1
fi
echo "check_roofline_plot: ok ($py)"
