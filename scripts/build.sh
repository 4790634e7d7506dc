#!/usr/bin/env bash
# Configures and builds into ${BUILD_DIR:-build}. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake -S . -B "$BUILD_DIR" "${gen[@]}" "$@"
cmake --build "$BUILD_DIR" -j"$(nproc)"
