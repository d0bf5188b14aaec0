#!/usr/bin/env bash
# Sets up a fresh Debian or Ubuntu machine for loupe and builds it into ./build:
# installs the packages the build needs (apt), configures with CMake and builds.
# The CUDA backend is built when the CUDA Toolkit and cuDNN are present (nvcc on PATH or in
# /usr/local/cuda), for LOUPE_CUDA_ARCH (default 90: H100/H200); otherwise loupe is CPU-only.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config zlib1g-dev libgtest-dev libopenblas-dev libstb-dev dataset-fashion-mnist python3 python3-matplotlib)
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

if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${LOUPE_CUDA_ARCH:-90}" > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
grep -E "^-- loupe:" build-configure.log || true
cmake --build build
