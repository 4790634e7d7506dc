#!/usr/bin/env bash
# Decode at long context on the GPU machine (issue 17): build, the decode-attention and CUDA-graph
# tests (with the engine-mode tests on the random Qwen3-0.6B reference), then batch-1 decode tok/s
# (`bench --latency`) at each prompt length for each configuration of kernel options.
# Run from the repository root with .deps carried (see scripts/gpu_build_test.sh):
#   bash scripts/gpu_decode_long.sh [tests] [bench]      (default both)
# Env: MODELS (qwen3-0.6b qwen3-8b), LENS (1024 8192 32000), OUTLEN (128),
#      CONFIGS "label:KEY=VALUE,KEY=VALUE;label2:..." (default: the defaults, and the long-context rule off).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
modes=${*:-tests bench}
J="$OUT/decode_long.jsonl"
if [[ " $modes " == *" tests "* ]]; then
  export NANOVLLM_HF06B_DIR=/tmp/hf06b
  (PYTHONUNBUFFERED=1 python3 scripts/make_qwen3_06b_reference.py --out "$NANOVLLM_HF06B_DIR" --prompts 2 --dump-prompt 0 --long "" \
    > "$OUT/hf06b.txt" 2>&1; echo "rc=$?" >> "$OUT/hf06b.txt") &
  ref_pid=$!
fi
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaAttention.Decode|CudaGraph}" || exit $?
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
if [[ " $modes " == *" tests "* ]]; then
  wait $ref_pid
  tail -2 "$OUT/hf06b.txt"
  ctest --test-dir build-gpu -R "CudaEngineModes" --output-on-failure --timeout 600 2>&1 | tail -15
fi
if [[ " $modes " == *" bench "* ]]; then
  IFS=';' read -r -a configs <<<"${CONFIGS:-default:;rule_off:long_decode_context=0}"
  for m in ${MODELS:-qwen3-0.6b qwen3-8b}; do
    for n in ${LENS:-1024 8192 32000}; do
      for c in "${configs[@]}"; do
        label=${c%%:*}
        opts=${c#*:}
        echo "== $m $n $label"
        build-gpu/nanovllm bench --model "$m" --load-format dummy --device cuda --latency --latency-prompt-len "$n" \
          --latency-output-len "${OUTLEN:-128}" --max-model-len 33024 --max-num-batched-tokens 32768 \
          ${opts:+--kernel-options "$opts"} 2>"$OUT/bench_err.txt" | sed "s/^{/{\"config\":\"$label\",/" | tee -a "$J"
      done
    done
  done
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
