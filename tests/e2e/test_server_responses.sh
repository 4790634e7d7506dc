#!/usr/bin/env bash
# The Responses API (/v1/responses) of `nanovllm serve` with the official openai npm client, on a
# scripted reasoning model and the tiny random model (tests/e2e/server/responses.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 170 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/responses.mjs"
