#!/usr/bin/env bash
# Reasoning and tool-call parsing, stop strings, usage and request fields of `nanovllm serve` on a
# scripted model, with the official openai npm client (tests/e2e/server/reasoning_tools.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 170 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/reasoning_tools.mjs"
