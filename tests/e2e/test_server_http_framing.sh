#!/usr/bin/env bash
# `nanovllm serve`: HTTP framing abuse over raw sockets (chunked bodies past the limit, conflicting Content-Length, pipelining, NUL bytes, malformed request lines, slow and idle clients, non-JSON content types) (tests/e2e/server/http_framing.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/http_framing.mjs"
