#!/usr/bin/env bash
# The test command: set up, build, run every CPU test (ctest label gpu is excluded: no GPU here).
# NANOVLLM_SANITIZE=1 additionally builds and tests under ASan+UBSan in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -LE gpu -j"$(nproc)"
if [ "${NANOVLLM_SANITIZE:-0}" = 1 ]; then
  # -O1 (asserts kept): the sanitized tests run ~2x faster than at -O0 with the same reports.
  BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
    -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DNANOVLLM_SANITIZE=ON -DNANOVLLM_CUDA=OFF
  # Left out under the sanitizers (they ran above): the suites whose time goes to arithmetic or to
  # comparing many inputs with an oracle, not to code paths the rest do not take (engines run to
  # compare numerics, random-corpus tokenizer and grammar oracles, sampled-output statistics).
  slow='^(TokenizerRandom|TokenizerCorpus|StructuredValidity|XgrammarOracle|PrefixGranuleEngine|HFFamilies'
  slow+='|CpuIntLinear|IntMoeCheckpoint|IntCheckpoint|Fp8Weights|Fp8Checkpoint|YarnModel|Speculative)\.'
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -LE 'gpu|e2e' -E "$slow" -j"$(nproc)"
fi
