#!/usr/bin/env bash
# Qwen3-MoE on the GPU machine (issue 22): the tiny MoE fixtures from transformers (if not committed
# yet), the GPU build, the MoE tests, then Qwen3-30B-A3B-shaped benchmarks with dummy weights on one
# 80 GB GPU (61 GB of BF16 weights). Run from the repository root with .deps carried
# (scripts/gpu_build_test.sh):   bash scripts/gpu_moe_session.sh [tests]
# Logs and JSON figures land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ ! -f tests/fixtures/tiny-qwen3-moe/reference.json ]; then
  PYTHONUNBUFFERED=1 python3 scripts/make_moe_fixtures.py --out tests/fixtures > "$OUT/moe_fixtures.txt" 2>&1
  tail -3 "$OUT/moe_fixtures.txt"
fi
python3 scripts/make_moe_fixtures.py --verify tests/fixtures | tee "$OUT/moe_verify.txt"
TARGETS="gpu_tests unit_models unit_engine nanovllm_cli" bash scripts/gpu_build_test.sh -R "CudaMoe|Qwen3Moe"
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
grep -h "^\[gpu\]" build-gpu/Testing/Temporary/LastTest.log | head -60 > "$OUT/moe_gpu_lines.txt"
# The CPU side with the fixtures: engine vs transformers (1e-4), the dense equivalence, TP=2 vs TP=1.
ctest --test-dir build-gpu -L unit -R "Qwen3Moe|TensorParallelEngine" --output-on-failure --timeout 600 2>&1 | tee "$OUT/ctest_moe_cpu.txt" | tail -15
[ "${1:-}" = tests ] && exit 0
B=build-gpu/nanovllm
# 61 GB of weights: 0.92 of 80 GB leaves ~10 GB for the KV cache and the step's activations.
M=(--model qwen3-30b-a3b --load-format dummy --device cuda --gpu-memory-utilization 0.92)
$B bench "${M[@]}" | tee "$OUT/moe_bench.jsonl"
$B bench "${M[@]}" --latency | tee -a "$OUT/moe_bench.jsonl"
$B bench "${M[@]}" --profile-decode 64 | tee -a "$OUT/moe_bench.jsonl"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
