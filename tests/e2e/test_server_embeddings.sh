#!/usr/bin/env bash
# /v1/embeddings of `nanovllm serve --runner pooling` with the official openai npm client
# (tests/e2e/server/embeddings.mjs): float, base64 and the client's default agree; batches, token ids,
# usage, normalization, vLLM's errors.
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 120 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/embeddings.mjs"
