#!/usr/bin/env bash
# `nanovllm serve`: graceful drain on SIGTERM (in-flight requests finish, new ones get 503, past --shutdown-timeout streams end with an error event + [DONE] and others get 503; a second signal stops at once) (tests/e2e/server/drain.mjs).
set -euo pipefail
: "${NANOVLLM_BINARY:?}" "${NANOVLLM_SOURCE_DIR:?}"
exec timeout 180 node "$NANOVLLM_SOURCE_DIR/tests/e2e/server/drain.mjs"
