#!/usr/bin/env bash
# Long-context session on the GPU machine (issue 17): build, the attention tests, the prefill
# attention kernel benchmark (ours, tensor cores and CUDA cores, against PyTorch's SDPA), then time
# to first token and decode at 1K/8K/32K prompt tokens against one transformers forward, for
# Qwen3-0.6B and Qwen3-8B (dummy weights). JSON lines land in $OUT/long.jsonl; logs in $OUT.
# Run from the repository root with .deps carried (see scripts/gpu_build_test.sh):
#   bash scripts/gpu_long_context.sh [kernel|ttft|throughput|all]   (default all)
# Env: LENS (prompt lengths), MODELS, OUTLEN (decode tokens), SKIP_HF=1 (ours only), NANOVLLM_BENCH_TILED=0.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
what=${1:-all}
LENS=${LENS:-1024 8192 32000}
J="$OUT/long.jsonl"
TARGETS="gpu_tests nanovllm_cli prefill_bench" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaAttention}" || exit $?
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
if [ "$what" = kernel ] || [ "$what" = all ]; then
  build-gpu/tests/prefill_bench $LENS | tee -a "$J"
  if [ -z "${SKIP_HF:-}" ]; then
    python3 scripts/ttft_transformers.py --model qwen3-0.6b --lens "$(echo $LENS | tr ' ' ,)" --kernels-only | tee -a "$J"
    python3 scripts/ttft_transformers.py --model qwen3-8b --lens "$(echo $LENS | tr ' ' ,)" --kernels-only | tee -a "$J"
  fi
fi
if [ "$what" = ttft ] || [ "$what" = all ]; then
  for m in ${MODELS:-qwen3-0.6b qwen3-8b}; do
    [ -n "${SKIP_HF:-}" ] || python3 scripts/ttft_transformers.py --model "$m" --lens "$(echo $LENS | tr ' ' ,)" --no-sdpa | tee -a "$J"
    for n in $LENS; do
      build-gpu/nanovllm bench --model "$m" --load-format dummy --device cuda --latency --latency-prompt-len "$n" \
        --latency-output-len "${OUTLEN:-128}" --max-model-len 33024 --max-num-batched-tokens 32768 | tee -a "$J"
    done
  done
fi
if [ "$what" = throughput ] || [ "$what" = all ]; then
  build-gpu/nanovllm bench --model qwen3-0.6b --load-format dummy --device cuda | tee -a "$J"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
