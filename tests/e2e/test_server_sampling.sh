#!/usr/bin/env bash
# `nanovllm serve` with the official openai npm client: logprobs (chat and completions, streamed
# and not), n > 1, penalties, logit_bias, min_tokens (tests/e2e/server/sampling.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 200 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/sampling.mjs"
