#!/usr/bin/env bash
# `nanovllm serve`: n = 64 with an 8 KB request id and a client that stops reading: RSS within a fixed bound, the stream completes on resume; past --max-pending-output-bytes the request is aborted and the connection closed (tests/e2e/server/slow_reader.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 240 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/slow_reader.mjs"
