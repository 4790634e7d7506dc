#!/usr/bin/env bash
# `nanovllm serve`: --limit-concurrency (503 and close past it, /health still answered) and running out of descriptors under prlimit --nofile=64 (/health answered through the reserve, accept errors logged rate-limited) (tests/e2e/server/descriptors.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 120 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/descriptors.mjs"
