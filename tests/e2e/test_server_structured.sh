#!/usr/bin/env bash
# Structured outputs of `nanovllm serve` with the official openai npm client and ajv
# (tests/e2e/server/structured.mjs): JSON schema, regex, choice, forced tool calls, reasoning.
# Needs the engine's grammar wiring (issue 42): fails without it.
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 190 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/structured.mjs"
