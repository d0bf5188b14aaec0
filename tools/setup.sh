#!/usr/bin/env bash
# Sets up a fresh Debian or Ubuntu machine for loupe and builds it into ./build:
# installs the packages the build needs (apt), configures with CMake and builds.
#   tools/setup.sh         the command, the library and the test suite. The CUDA backend is built
#                          when the CUDA Toolkit and cuDNN are present (nvcc on PATH or in
#                          /usr/local/cuda), for LOUPE_CUDA_ARCH (default 90: H100/H200); otherwise
#                          loupe is CPU-only.
#   tools/setup.sh --cpu   the command and the library only, for the CPU (no CUDA, no tests): the
#                          quick way to train on a machine without a GPU. Run without --cpu later to
#                          add the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

cpu_only=0
for arg in "$@"; do
  case "$arg" in
    --cpu) cpu_only=1 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (tools/setup.sh [--cpu])" >&2; exit 1 ;;
  esac
done

packages=(cmake ninja-build g++ pkg-config zlib1g-dev libopenblas-dev libdnnl-dev libstb-dev libprotobuf-dev protobuf-compiler
          libboost-dev nlohmann-json3-dev libcli11-dev libzip-dev libhdf5-dev dataset-fashion-mnist python3 python3-numpy python3-h5py python3-matplotlib)
[ "$cpu_only" = 1 ] || packages+=(libgtest-dev ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

if [ "$cpu_only" = 1 ]; then
  # Only the command and the library: no CUDA backend, no tests, no benchmarks.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOUPE_CUDA=OFF -DLOUPE_BUILD_TESTS=OFF > build-configure.log 2>&1 \
    || { cat build-configure.log; exit 1; }
  grep -E "^-- loupe:" build-configure.log || true
  cmake --build build --target loupe_cli
  echo "setup: built build/loupe for the CPU (no tests: run tools/setup.sh without --cpu for them)"
  exit 0
fi
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# AUTO and the tests ON explicitly: a build/ configured by --cpu before gets both back.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOUPE_CUDA=AUTO -DLOUPE_BUILD_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${LOUPE_CUDA_ARCH:-90}" > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
grep -E "^-- loupe:" build-configure.log || true
cmake --build build
