#!/usr/bin/env bash
# `nanovllm serve`: 64 concurrent streaming clients; outputs equal the non-streamed ones; idle KV cache afterwards (tests/e2e/server/load.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/load.mjs"
