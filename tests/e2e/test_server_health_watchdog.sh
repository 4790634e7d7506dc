#!/usr/bin/env bash
# `nanovllm serve`: /health answers 503 with the reason while the engine is stalled (test hook), 200 once it moves again (tests/e2e/server/health_watchdog.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 90 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/health_watchdog.mjs"
