#!/usr/bin/env bash
# Runs one fuzz target of a LOUPE_FUZZ build with the settings of docs/fuzzing.md:
#   tests/fuzz/fuzz.sh [--work DIR] BUILD_DIR TARGET [RUNS] [more libFuzzer flags...]
# TARGET is idx, idx_gz, cifar, text, image, checkpoint, npy, records, profile, keras or npz; RUNS
# defaults to 1000000 executions
# (-1: until stopped, or until a -max_total_time=SECONDS given after it).
# The committed corpus tests/fuzz/corpus/TARGET seeds it and is never written; new inputs go to
# DIR/TARGET/corpus and findings (crash-*, leak-*, oom-*, slow-unit-*, timeout-*) to
# DIR/TARGET/findings (--work DIR; /tmp/loupe-fuzz by default).
set -euo pipefail
work_root=/tmp/loupe-fuzz
if [ "${1:-}" = --work ]; then
  [ $# -ge 2 ] || { echo "$0: --work needs a directory" >&2; exit 2; }
  work_root=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  echo "usage: $0 [--work DIR] BUILD_DIR TARGET [RUNS] [libFuzzer flags...]" >&2
  exit 2
fi
build=$1 target=$2 runs=${3:-1000000}
shift $(( $# < 3 ? $# : 3 ))
case $target in  # -max_len: room for the largest seed and a little more
  idx) max_len=4096 ;;
  idx_gz) max_len=8192 ;;
  cifar) max_len=12400 ;;  # four records of 3073 bytes
  text) max_len=4096 ;;
  image) max_len=8192 ;;
  checkpoint) max_len=8192 ;;
  npy) max_len=4096 ;;
  records) max_len=4096 ;;
  profile) max_len=16384 ;;  # a whole profile's JSON is a few to twenty kilobytes
  keras) max_len=16384 ;;  # a model file is kilobytes; accepted ones of up to 200,000 parameters are built
  npz) max_len=8192 ;;
  *) echo "$0: unknown target '$target' (idx, idx_gz, cifar, text, image, checkpoint, npy, records, profile, keras, npz)" >&2; exit 2 ;;
esac
src=$(cd "$(dirname "$0")" && pwd)
work=$work_root/$target
mkdir -p "$work/corpus" "$work/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# -malloc_limit_mb: one allocation over 1 GiB is a finding; -rss_limit_mb: 2 GiB in all is one too.
exec "$build/tests/fuzz/fuzz_$target" -runs="$runs" -max_len=$max_len -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/findings/" "$@" "$work/corpus" "$src/corpus/$target"
