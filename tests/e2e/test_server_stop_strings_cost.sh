#!/usr/bin/env bash
# `nanovllm serve`: large stop-string lists cost one shared copy across n choices, and matching them does not slow other streams (tests/e2e/server/stop_strings_cost.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/stop_strings_cost.mjs"
