#!/usr/bin/env bash
# Builds loupe for the CPU only with AddressSanitizer (LeakSanitizer included) and
# UndefinedBehaviorSanitizer into ./build-asan, then runs the cpu tests but the slow ones under
# them. Every sanitizer report, from a test binary or from a program a test starts (the loupe
# command, the install_consumer program), is written to build-asan/sanitizer-logs/ and fails the
# run, also where the test itself expected that program to exit non-zero. docs/sanitizers.md.
#   tools/sanitize.sh [CTEST ARGS...]        e.g. tools/sanitize.sh -R test_nvtx
# Needs what tools/setup.sh installs (it does not install anything itself).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-asan
mkdir -p "$dir"
# -O1 -g1: a third of the compile time of -O3 -g (the build dominates the run), stacks with
# file:line and inlined frames; the library's own -O3 is left out under LOUPE_SANITIZE.
# Without oneDNN (LOUPE_DNNL=OFF): the main build (tools/setup.sh) has it, so CI covers both CPU
# convolutions, oneDNN's there and the im2col fallback here.
# Through ccache where it is installed: the mutation check (docs/testing.md) compiles each mutated
# object twice in this build, the mutant and then the restored original, which is a cache hit.
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "${launcher[@]}" \
  -DLOUPE_CUDA=OFF -DLOUPE_DNNL=OFF -DLOUPE_SANITIZE=address,undefined > "$dir/configure.log" 2>&1 \
  || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"  # CMake's own variable, as it reads it

logs="$PWD/$dir/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
# Reports go to $logs/report.PID (log_path is shared by both sanitizers): a report from a child
# process whose exit status a test ignores or expects to be non-zero is still seen below.
# intercept_tls_get_addr=0: gcc 12's runtime misreads some dynamic TLS blocks and its leak check
# can then crash at exit (docs/sanitizers.md, "The run").
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:intercept_tls_get_addr=0:log_path=$logs/report"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/report"
rc=0
ctest --test-dir "$dir" -L cpu -LE slow -j "$(nproc)" --output-on-failure "$@" || rc=$?

reports=("$logs"/report.*)
if [ -e "${reports[0]}" ]; then
  for r in "${reports[@]}"; do
    echo "==== $r"
    cat "$r"
  done
  echo "sanitize: ${#reports[@]} sanitizer report(s), above (also in $logs)" >&2
  exit 1
fi
[ "$rc" -eq 0 ] && echo "sanitize: the cpu tests passed under ASan+LSan+UBSan, no reports"
exit "$rc"
