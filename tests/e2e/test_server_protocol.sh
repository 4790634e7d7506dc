#!/usr/bin/env bash
# The protocol details a vLLM switcher meets (stop_reason, error bodies, return_token_strs, chat
# echo, metrics, vLLM flags, port check, bench serve) with the official openai npm client
# (tests/e2e/server/protocol.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 180 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/protocol.mjs"
