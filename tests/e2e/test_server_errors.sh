#!/usr/bin/env bash
# `nanovllm serve`: a corpus of bad requests gets OpenAI-style errors; the server and a concurrent good request are unaffected (tests/e2e/server/errors.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 150 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/errors.mjs"
