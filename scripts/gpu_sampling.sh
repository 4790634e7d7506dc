#!/usr/bin/env bash
# Sampling extras on the GPU machine (issue 19): build, the sampler tests (penalties, logit_bias,
# min_tokens and logprobs against the CPU backend), then the bench.py throughput workload three
# ways: plain, every request asking for 5 logprobs, every request with repetition and frequency
# penalties. The issue asks: plain unchanged, logprobs < 10% slower.
# Run from the repository root with .deps carried (see scripts/gpu_build_test.sh):
#   bash scripts/gpu_sampling.sh [tests] [bench]      (default both)
# Env: MODEL (qwen3-0.6b), NUM_SEQS (256).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
modes=${*:-tests bench}
J="$OUT/sampling.jsonl"
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaSampling|CudaSampler}" || exit $?
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
if [[ " $modes " == *" bench "* ]]; then
  declare -a labels=(none logprobs5 penalties)
  declare -a flags=("" "--logprobs 5" "--repetition-penalty 1.1 --frequency-penalty 0.5")
  for i in 0 1 2; do
    echo "== ${labels[$i]}"
    build-gpu/nanovllm bench --model "${MODEL:-qwen3-0.6b}" --load-format dummy --device cuda \
      --num-seqs "${NUM_SEQS:-256}" ${flags[$i]} 2>"$OUT/bench_err_${labels[$i]}.txt" |
      sed "s/^{/{\"config\":\"${labels[$i]}\",/" | tee -a "$J"
  done
  python3 - "$J" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
b = next((r["output_tok_s"] for r in rows if r["config"] == "none"), None)
for r in rows:
    rel = f" ({r['output_tok_s'] / b - 1:+.1%} vs none)" if b else ""
    print(f"{r['config']:10s} {r['output_tok_s']:10.0f} output tok/s  {r['seconds']:.2f} s{rel}")
PY
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
