#!/usr/bin/env bash
# `nanovllm serve` under a JSON fuzz run of 20 s (NANOVLLM_FUZZ_SECONDS): never a 5xx or a dropped connection, idle afterwards (tests/e2e/server/fuzz_live.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 300 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/fuzz_live.mjs"
