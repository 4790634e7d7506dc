#!/usr/bin/env bash
# `nanovllm serve` without a tokenizer: refused at start-up unless --skip-tokenizer-init, which serves token ids in and out (tests/e2e/server/token_ids_only.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 120 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/token_ids_only.mjs"
