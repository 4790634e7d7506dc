#!/usr/bin/env bash
# The INT GEMV's norm prologue (int_gemv_norm.cuh: the decoder layer's add + RMSNorm folded into the
# v3 / v4 GEMV after it) and the wide Hopper GEMM under int_gemm auto, on the GPU machine in one call
# (device tool, .deps carried), from the repository root:
#   1. build gpu_tests and nanovllm_cli; the INT GEMV / GEMM tests and the plan tests (TESTS);
#   2. Qwen3-8B (dummy) batch-1 decode tok/s: AWQ with gemv_norm auto (fused) and never, then BF16
#      (ROUNDS rounds, alternating);
#   3. with THROUGHPUT=1: bench.py's workload on Qwen3-8B: AWQ under int_gemm auto (the wide form for
#      the plain products past 64 rows) and wgmma (the 64-row form), then BF16.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh \
  -R "${TESTS:-CudaIntWeights\.(NormPrologue|Wgmma|GatedMlp|CudaGraph|V4Equals|LinearAwkward)|IntLinearPlan|KernelOptions|CudaFused}"
ok=$?
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|\*\*\*|Failed" "$OUT/ctest.txt" | tail -12
grep -E "Failure|worst error|Expected|Which is|fused" "$OUT/LastTest.log" | head -30

# NAME KIND ARGS...: one nanovllm bench run (KIND latency: batch-1 decode; throughput: bench.py's
# workload), its figure printed.
bench() {
  local name=$1 kind=$2
  shift 2
  local extra=()
  [ "$kind" = latency ] && extra=(--latency)
  timeout 300 build-gpu/nanovllm bench --model qwen3-8b --load-format dummy --device cuda "${extra[@]}" "$@" \
    > "$OUT/$name.jsonl" 2> "$OUT/$name.err"
  local rc=$?
  python3 - "$name" "$rc" "$OUT/$name.jsonl" <<'PY'
import json, sys
name, rc, path = sys.argv[1:4]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
    if "decode_tok_s" in r:
        print(f"{name:18s}: batch-1 decode {r['decode_tok_s']:.1f} tok/s")
    else:
        print(f"{name:18s}: {r['output_tok_s']:.1f} output tok/s, {r['seconds']:.2f} s "
              f"(prefill {r['prefill_seconds']:.2f} s, decode {r['decode_seconds']:.2f} s)")
except (OSError, ValueError, KeyError, IndexError) as e:
    print(f"{name:18s}: no figure (rc {rc}, {e})")
PY
  [ "$rc" = 0 ] || tail -3 "$OUT/$name.err"
}
echo "== Qwen3-8B batch-1 decode (dummy weights)"
for r in $(seq 1 "${ROUNDS:-2}"); do
  bench "b1_awq_norm_$r" latency --quantization awq
  bench "b1_awq_nonorm_$r" latency --quantization awq --kernel-options gemv_norm=never
  bench "b1_bf16_$r" latency --quantization none
done
[ "${THROUGHPUT:-0}" = 1 ] || exit "$ok"
echo "== bench.py workload, Qwen3-8B (dummy)"
bench tp_awq_auto throughput --quantization awq
bench tp_awq_wgmma throughput --quantization awq --kernel-options int_gemm=wgmma
bench tp_bf16 throughput --quantization none
exit "$ok"
