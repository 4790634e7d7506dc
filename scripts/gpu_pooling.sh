#!/usr/bin/env bash
# Pooling models (issue 47) on the GPU machine, in one call (device tool, .deps carried):
#   1. the reference models: tests/fixtures/pooling (tiny, FP32; commit them from $OUT/pooling-fixtures)
#      and /tmp/pool06b (Qwen3-0.6B shapes, BF16), both by scripts/make_embedding_fixture.py;
#   2. build; the CPU fixture test (PoolingFixtures.*) and the GPU tests (CudaPooling.*);
#   3. embeddings throughput, 1,000 inputs of 512 tokens, Qwen3-0.6B shapes: ours
#      (`nanovllm bench --embed`, dummy weights) and transformers' batched bf16 forward
#      (scripts/bench_embed_transformers.py, random weights), alternating ROUNDS times (default 2).
# Env: ROUNDS, BATCH (transformers' batch, default 64).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
echo "== reference models"
python3 scripts/make_embedding_fixture.py --out tests/fixtures/pooling || echo "tiny fixtures failed"
python3 scripts/make_embedding_fixture.py --out /tmp/pool06b --size 0.6b || echo "0.6B fixtures failed"
mkdir -p "$OUT/pooling-fixtures" && cp -r tests/fixtures/pooling/. "$OUT/pooling-fixtures/"
TARGETS="gpu_tests unit_models nanovllm_cli" bash scripts/gpu_build_test.sh -R "CudaPooling" --timeout 600 \
  || echo "GPU tests failed"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
echo "== CPU fixture test and the 0.6B-size comparison with transformers"
NANOVLLM_SOURCE_DIR=$PWD build-gpu/tests/unit_models --gtest_filter='PoolingFixtures.*'
NANOVLLM_SOURCE_DIR=$PWD NANOVLLM_EMBED06B_DIR=/tmp/pool06b build-gpu/tests/gpu_tests --gtest_filter='CudaPooling.*'
echo "== embeddings throughput (1000 x 512 tokens, Qwen3-0.6B shapes)"
for r in $(seq "${ROUNDS:-2}"); do
  build-gpu/nanovllm bench --embed --model qwen3-0.6b --load-format dummy --max-model-len 1024 | tee -a "$OUT/embed_bench.jsonl"
  python3 scripts/bench_embed_transformers.py --batch "${BATCH:-64}" | tee -a "$OUT/embed_bench.jsonl"
done
