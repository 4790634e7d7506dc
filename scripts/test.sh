#!/usr/bin/env bash
# The test command: set up, build, run every CPU test (ctest label gpu is excluded: no GPU here).
# NANOVLLM_SANITIZE=1 additionally builds and tests under ASan+UBSan in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -LE gpu -j"$(nproc)"
if [ "${NANOVLLM_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DNANOVLLM_SANITIZE=ON -DNANOVLLM_CUDA=OFF
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -LE 'gpu|e2e' -j"$(nproc)"
fi
