#!/usr/bin/env bash
# Installs the built loupe into a scratch prefix, then configures, builds and runs
# tests/consumer against it with find_package(loupe): the CMake package works for other projects.
set -euo pipefail
build=$1 src=$2
work="$build/consumer-check"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }
cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$work/build" > /dev/null
"$work/build/consumer"
