#!/usr/bin/env bash
# CTest install_consumer: installs the built loupe into a scratch prefix, then
# 1. configures, builds and runs tests/consumer against it with find_package(loupe): the CMake
#    package works for other projects;
# 2. moves the prefix elsewhere and runs the installed `loupe` from there, with no LOUPE_TOOLS_DIR:
#    it starts (its RPATH finds the installed libloupe, not the build's), says where its plot scripts
#    are (PREFIX/share/loupe) and trains one short epoch;
# 3. with --plot (CTest install_consumer_plot), instead of 1 and the epoch: draws a plot with the
#    installed script. That test alone exits 77, a skip, where no python3 has matplotlib (decided
#    before anything runs), so the rest is never reported as passed beside a skipped half;
# 4. with --gpu (CTest install_consumer_gpu, label gpu): 1 alone, which must run on the GPU and
#    print its GPU line; exit 77, a skip, where no GPU is visible (nvidia-smi).
#   check.sh BUILD_DIR SOURCE_DIR [--plot | --gpu]
set -euo pipefail
build=$(cd "$1" && pwd) src=$2 plot=${3:-}
fail() { echo "install_consumer: FAIL: $*"; exit 1; }
py=""
if [ "$plot" = --plot ]; then
  for cand in /usr/bin/python3 python3; do
    if command -v "$cand" > /dev/null && "$cand" -c "import matplotlib" 2> /dev/null; then py=$cand; break; fi
  done
  if [ -z "$py" ]; then
    # Under LOUPE_TEST_REQUIRE=cpu (CI, where tools/setup.sh installed it) a missing matplotlib fails.
    [ "${LOUPE_TEST_REQUIRE:-}" = cpu ] && fail "no python3 with matplotlib under LOUPE_TEST_REQUIRE=cpu"
    echo "install_consumer: SKIPPED: no python3 with matplotlib (install python3-matplotlib; tools/setup.sh does)"
    exit 77
  fi
fi
if [ "$plot" = --gpu ] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "install_consumer: SKIPPED: no GPU visible (nvidia-smi)"
  exit 77
fi
work="$build/consumer-check${plot:+-${plot#--}}"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }
if [ "$plot" != --plot ]; then
  cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$work/build" > /dev/null
  # The README's example: a model written in C++ gets loupe's report through the run. Its lines
  # must come out: the header, each epoch's, the host's measurements; on a GPU the GPU's too.
  "$work/build/consumer" --synthetic > "$work/consumer.out" 2>&1 || { cat "$work/consumer.out"; fail "the consumer failed"; }
  cat "$work/consumer.out"
  for line in '^model   my_mlp: MLP 784-256-10 written in C\+\+, 203,530 parameters$' '^recipe  Adam lr 0.001, batch 128, epochs 3' \
              '^epoch 1/3  loss ' '^epoch 3/3  loss ' '^  step p50 ' '^  advice' '^consumer: test accuracy '; do
    grep -qE "$line" "$work/consumer.out" || fail "the consumer's report has no line matching '$line'"
  done
  if grep -q '^device  cuda' "$work/consumer.out"; then
    grep -qE '^  GPU util ' "$work/consumer.out" || fail "the consumer ran on a GPU but its report has no GPU line"
  elif [ "$plot" = --gpu ]; then
    fail "a GPU is visible but the consumer ran on the CPU (a loupe built without CUDA?)"
  fi
  if [ "$plot" = --gpu ]; then
    echo "install_consumer: the consumer's report on the GPU has its GPU line"
    exit 0
  fi
fi

# The installed command, relocated: nothing may depend on the prefix it was installed to.
prefix="$work/moved prefix"
mv "$work/prefix" "$prefix"
L="$prefix/bin/loupe"
[ -x "$L" ] || fail "no $L"
for script in plot_util.py plot_sweep.py plot_roofline.py; do
  [ -f "$prefix/share/loupe/$script" ] || fail "$script was not installed in share/loupe"
done
lib=$(ldd "$L" | sed -n 's/^[[:space:]]*libloupe\.so[^ ]* => \(.*\) (0x[0-9a-f]*)$/\1/p')
case "$lib" in
  "$prefix"/*) ;;
  *) ldd "$L"; fail "the installed loupe loads libloupe from '$lib', not from its prefix" ;;
esac
run() { (cd "$work" && env -u LOUPE_TOOLS_DIR "$L" "$@") > "$work/out" 2>&1 || { cat "$work/out"; fail "loupe $* exited non-zero"; }; }
run --version
cat "$work/out"
grep -q "^plot scripts: $prefix/share/loupe$" "$work/out" || fail "the installed loupe does not look for its scripts in $prefix/share/loupe"

if [ "$plot" != --plot ]; then
  run train mnist_mlp --device cpu --synthetic --epochs 1 --max-steps 20 --plain --no-nvml
  grep -q "^done in " "$work/out" || { cat "$work/out"; fail "the installed loupe did not train an epoch"; }
  echo "install_consumer: the installed loupe trained one epoch (20 steps)"
  exit 0
fi
run roofline --device cpu --sizes 64 --min-seconds 0.01 --csv "$work/r.csv" --png "$work/r.png"
[ "$(head -c 4 "$work/r.png" | od -An -tx1 | tr -d ' \n')" = "89504e47" ] || { cat "$work/out"; fail "no PNG drawn"; }
echo "install_consumer: the installed loupe drew $work/r.png with $prefix/share/loupe/plot_roofline.py"
