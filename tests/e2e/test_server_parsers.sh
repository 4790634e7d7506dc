#!/usr/bin/env bash
# Tool-call parsers llama3_json, mistral, pythonic and reasoning parser deepseek_r1 of `nanovllm
# serve`, each on a scripted model of its family, with the official openai npm client
# (tests/e2e/server/parsers.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/parsers.mjs"
