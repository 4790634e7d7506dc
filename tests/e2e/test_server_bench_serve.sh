#!/usr/bin/env bash
# `nanovllm bench-serve` (the serving benchmark) against a live CPU server: counts, distributions, JSON, mistakes (tests/e2e/server/bench_serve.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 180 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/bench_serve.mjs"
