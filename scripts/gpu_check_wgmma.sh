#!/usr/bin/env bash
# The Hopper W4A16 GEMM (int_gemm_wgmma.cu) on the GPU machine, in one call (device tool, .deps
# carried), from the repository root:
#   1. build gpu_tests, nanovllm_cli, int_linear_bench; the INT GEMM tests (TESTS);
#   2. int_linear_bench at T 33..256 (BENCH_T): us of the mma.sync GEMM, the Hopper GEMM, dequantize +
#      cuBLASLt and BF16 per Qwen3-8B layer, and each GEMM's largest difference from dequantize;
#   3. with THROUGHPUT=1: bench.py's workload on Qwen3-8B (dummy), AWQ under each int_gemm of GEMMS
#      (default "auto dequantize"), then BF16; with WGMMA_TP=1 and the tests passed, int_gemm=wgmma.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli int_linear_bench" bash scripts/gpu_build_test.sh \
  -R "${TESTS:-CudaIntWeights\.(Wgmma|TensorCore|GatedMlp|CudaGraph)|IntLinearPlan|KernelOptions}"
ok=$?
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|\*\*\*" "$OUT/ctest.txt" | tail -12
grep -E "Failure|worst error|Expected|Which is|max rel|bad " "$OUT/LastTest.log" | head -30
echo "== int_linear_bench ${BENCH_T:-33 64 96 128 192 256}"
timeout 240 build-gpu/tests/int_linear_bench ${BENCH_T:-33 64 96 128 192 256} > "$OUT/gemm.jsonl" 2> "$OUT/gemm.err"
echo "(rc $?)"; tail -3 "$OUT/gemm.err"
python3 - "$OUT/gemm.jsonl" <<'PY'
import json, sys
tot = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "wgmma_us" not in r:
        continue
    t = tot.setdefault(r["T"], [0.0] * 4)
    for i, k in enumerate(["mma_us", "wgmma_us", "dequant_us", "bf16_us"]):
        t[i] += r[k]
    print(f"{r['layer']:7s} T {r['T']:3d}: mma {r['mma_us']:7.2f}  wgmma {r['wgmma_us']:7.2f} "
          f"({r['wgmma_TFLOP_s']:5.0f} TF/s)  dequant {r['dequant_us']:7.2f}  bf16 {r['bf16_us']:7.2f}  "
          f"splits {r['splits']}  diff mma {r['mma_dequant_max_rel_diff']:.1e} wgmma {r['wgmma_dequant_max_rel_diff']:.1e}")
for T, (a, b, c, d) in sorted(tot.items()):
    print(f"layer sum T {T:3d}: mma {a:7.2f}  wgmma {b:7.2f}  dequant {c:7.2f}  bf16 {d:7.2f} us  (bf16/wgmma {d / b:.2f}x)")
PY
[ "${THROUGHPUT:-0}" = 1 ] || exit "$ok"
echo "== bench.py workload, Qwen3-8B (dummy)"
tp() {  # NAME ARGS...
  local name=$1
  shift
  timeout 200 build-gpu/nanovllm bench --model qwen3-8b --load-format dummy --device cuda "$@" \
    > "$OUT/tp_$name.jsonl" 2> "$OUT/tp_$name.err"
  local rc=$?
  python3 - "$name" "$rc" "$OUT/tp_$name.jsonl" <<'PY'
import json, sys
name, rc, path = sys.argv[1:4]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
    print(f"{name} (rc {rc}): {r['output_tok_s']:.1f} output tok/s, {r['seconds']:.2f} s "
          f"(prefill {r['prefill_seconds']:.2f} s, decode {r['decode_seconds']:.2f} s)")
except (OSError, ValueError, KeyError, IndexError) as e:
    print(f"{name} (rc {rc}): no result ({e})")
PY
}
for g in ${GEMMS:-auto dequantize}; do tp "awq_$g" --quantization awq --kernel-options "int_gemm=$g"; done
tp bf16 --quantization none
# The Hopper kernel only where its tests passed.
[ "$ok" = 0 ] && [ -n "${WGMMA_TP:-}" ] && tp awq_wgmma --quantization awq --kernel-options int_gemm=wgmma
exit "$ok"
