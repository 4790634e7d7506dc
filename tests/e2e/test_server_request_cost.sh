#!/usr/bin/env bash
# `nanovllm serve`: bounded cost per request: template bombs refused fast, /health fast while they run, the request pool's 503, and the caps on stop strings, request ids, logit_bias, prompt logprobs and prompt bytes (tests/e2e/server/request_cost.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/request_cost.mjs"
