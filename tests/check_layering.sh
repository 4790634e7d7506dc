#!/usr/bin/env bash
# The layering rule of issue 41, kept by a test: the server (src/nanovllm/server/), the CLI (apps/)
# and the Python package (python/) talk to the front end (src/nanovllm/frontend/: LLM, the request
# tracker) and never to the engine's internals. Fails, naming file and line, on
#   - a reach-through to the engine: `engine()`, `scheduler()`, `block_manager()`;
#   - an include of a nanovllm/engine/ header other than the two below.
# Allowed engine header, and why:
#   nanovllm/engine/llm_engine.h       the token-level engine API (nano-vllm's LLMEngine, StepResult
#                                      with the scheduler's statistics): `nanovllm bench` drives it
# And the folders of src/nanovllm/ include only the folders below them: each library's own
# dependencies in src/nanovllm/CMakeLists.txt, with theirs (the table `below` here).
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
  grep -vE 'nanovllm/engine/llm_engine\.h[">]' || true)
if [ -n "$includes" ]; then
  echo "Includes engine internals (the server, apps and python go through nanovllm/frontend/):"
  echo "$includes"
  bad=1
fi

# The folder graph: what each library may include (its CMake dependencies and theirs).
declare -A below=(
  [utils]=""
  [jinja]="utils"
  [tokenizer]="utils jinja"
  [config]="utils"
  [structured]="tokenizer jinja config utils"
  [backends]="config utils"
  [backends/cpu]="backends config utils"
  [backends/cuda]="backends config utils"
  [dist]="backends backends/cuda config utils"
  [layers]="backends config utils"
  [models]="layers dist backends backends/cuda config utils"
  [spec]="config utils"
  [engine]="spec models layers dist backends backends/cpu backends/cuda structured config utils"
  [output]="engine spec models layers dist backends backends/cpu backends/cuda structured config utils tokenizer jinja"
  [frontend]="output engine spec models layers dist backends backends/cpu backends/cuda structured config utils tokenizer jinja"
  [server]="frontend output engine spec models layers dist backends backends/cpu backends/cuda structured config utils tokenizer jinja"
)
for f in $(find src/nanovllm -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
  rel=${f#src/nanovllm/}
  area=${rel%/*}
  [ "$area" = "$rel" ] && { echo "$f: a source file at the root of src/nanovllm (every file belongs to a library's folder)"; bad=1; continue; }
  case $area in backends/cuda/*) area=backends/cuda ;; esac
  if [ -z "${below[$area]+set}" ]; then
    echo "$f: folder $area is not in the layering table of tests/check_layering.sh (nor a library in CMakeLists.txt?)"
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    dep=${inc%/*}
    case $dep in backends/cuda/*) dep=backends/cuda ;; esac
    [ "$dep" = "$area" ] && continue
    if [[ " ${below[$area]} " != *" $dep "* ]]; then
      echo "$f includes nanovllm/$inc: $area may include only ${below[$area]:-nothing of ours}"
      bad=1
    fi
  done < <(grep -oE '#[[:space:]]*include[[:space:]]*"nanovllm/[^"]+"' "$f" | sed -E 's/.*"nanovllm\/([^"]+)"/\1/')
done
[ "$bad" = 0 ] && echo "layering: every folder includes only the folders below it; server/, apps/ and python/ reach the engine through the front end only"
exit "$bad"
