#!/usr/bin/env bash
# `nanovllm serve`: 2,000 concurrent streaming connections on loopback, each receiving every token; prints the server's memory at that load (tests/e2e/server/many_streams.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
ulimit -n "$(ulimit -Hn)"  # node holds a descriptor per connection too
exec timeout 600 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/many_streams.mjs"
