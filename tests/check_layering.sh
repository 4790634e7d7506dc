#!/usr/bin/env bash
# The layering rule of issue 41, kept by a test: the server (src/nanovllm/server/), the CLI (apps/)
# and the Python package (python/) talk to the front end (src/nanovllm/frontend/: LLM, the request
# tracker) and never to the engine's internals. Fails, naming file and line, on
#   - a reach-through to the engine: `engine()`, `scheduler()`, `block_manager()`;
#   - an include of a nanovllm/engine/ header other than the two below.
# Allowed engine headers, and why:
#   nanovllm/engine/llm_engine.h       the token-level engine API (nano-vllm's LLMEngine, StepResult
#                                      with the scheduler's statistics): `nanovllm bench` drives it
#   nanovllm/engine/tensor_parallel.h  tensor-parallel start-up (the worker ranks' loop)
# Usage: check_layering.sh [SOURCE_DIR]   (default: $NANOVLLM_SOURCE_DIR, else the repository root)
set -euo pipefail
root=${1:-${NANOVLLM_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$root"
dirs=(src/nanovllm/server apps python)
for d in "${dirs[@]}"; do [ -d "$d" ] || { echo "check_layering: $root/$d is missing" >&2; exit 2; }; done
files=$(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' -o -name '*.cu' \
  -o -name '*.py' \) | sort)
bad=0
reach=$(grep -nE '\b(engine|scheduler|block_manager)\(\)' $files || true)
if [ -n "$reach" ]; then
  echo "Reaches into the engine (use LLM::config(), model_config(), engine_info(), scheduler_stats(), tracker()," \
    "or StepResult::stats instead):"
  echo "$reach"
  bad=1
fi
includes=$(grep -nE '#[[:space:]]*include[[:space:]]*["<]nanovllm/engine/' $files |
  grep -vE 'nanovllm/engine/(llm_engine|tensor_parallel)\.h[">]' || true)
if [ -n "$includes" ]; then
  echo "Includes engine internals (the server, apps and python go through nanovllm/frontend/):"
  echo "$includes"
  bad=1
fi
[ "$bad" = 0 ] && echo "layering: server/, apps/ and python/ reach the engine through the front end only"
exit "$bad"
