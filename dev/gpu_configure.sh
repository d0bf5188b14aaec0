#!/usr/bin/env bash
# Configures build-gpu/ on a device machine (Release, sm_90) and builds it. The GPU machines have
# neither nlohmann-json3-dev nor libcli11-dev: carry them unpacked (apt-get download, then dpkg -x
# into .devdata/deps; .devdata is git-ignored and named in `carry`), and CMake finds them there.
# usage: dev/gpu_configure.sh LOG [extra cmake arguments]
set -u
log=$1; shift
prefix=()
[ -d "$PWD/.devdata/deps/usr" ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.devdata/deps/usr")
cmake -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${prefix[@]}" "$@" > "$log" 2>&1 &&
  cmake --build build-gpu >> "$log" 2>&1
