#!/usr/bin/env bash
# `nanovllm serve` driven by the official openai npm client (tests/e2e/server/openai_client.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/openai_client.mjs"
