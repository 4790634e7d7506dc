#!/usr/bin/env bash
# `nanovllm serve`: clients dropping mid-stream and request timeouts free their requests and KV blocks (tests/e2e/server/disconnect.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/disconnect.mjs"
