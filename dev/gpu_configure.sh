#!/usr/bin/env bash
# Configures build-gpu/ on a device machine (Release, sm_90) and builds it. The GPU machines have
# neither nlohmann-json3-dev nor libcli11-dev: carry them unpacked (apt-get download, then dpkg -x
# into .devdata/deps; .devdata is git-ignored and named in `carry`), and CMake finds them there.
# usage: dev/gpu_configure.sh LOG [extra cmake arguments]
# SOURCE (.), BUILD (build-gpu) and TARGET (all): another tree into another folder, e.g. the A/B
# scripts' carried worktree: SOURCE=.base BUILD=build-base TARGET=loupe_cli.
set -u
log=$1; shift
prefix=() target=()
[ -d "$PWD/.devdata/deps/usr" ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.devdata/deps/usr")
[ -n "${TARGET:-}" ] && target=(--target "$TARGET")
cmake -S "${SOURCE:-.}" -B "${BUILD:-build-gpu}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${prefix[@]}" "$@" > "$log" 2>&1 &&
  cmake --build "${BUILD:-build-gpu}" "${target[@]}" >> "$log" 2>&1
