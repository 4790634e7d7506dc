#!/usr/bin/env bash
# Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) on the GPU machine, in one call (device tool,
# .deps carried), from the repository root: builds gpu_tests and gemm_bench, runs CudaGemmWgmma.*
# (every form against a double product; the fused gate_up + SiLU against the GEMM + silu_and_mul),
# then gemm_bench at M rows (GEMM_M, default "4096 16384"): one line per (model, layer, M) with
# TFLOP/s of cuBLASLt and of each form, and for gate_up cuBLASLt + silu_and_mul against the fused
# form. The JSON lines stay in $OUT/gemm.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests gemm_bench" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaGemmWgmma}"
ok=$?
grep -E "tests passed|tests failed|\*\*\*" "$OUT/ctest.txt" | tail -5
grep -E "\[gpu\] gemm_wgmma|Failure|Expected|Which is" "$OUT/LastTest.log" | head -40
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
timeout 300 build-gpu/tests/gemm_bench ${GEMM_M:-4096 16384} > "$OUT/gemm.jsonl" 2> "$OUT/gemm.err"
echo "== gemm_bench (rc $?)"; tail -3 "$OUT/gemm.err"
python3 - "$OUT/gemm.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    forms = [k[:-3] for k in r if k.endswith("_us") and k not in ("cublaslt_us", "cublaslt_silu_and_mul_us", "gate_up_silu_us")]
    cells = " | ".join(f"{f} {r[f + '_tflops']:.0f} ({r[f + '_tflops'] / r['cublaslt_tflops']:.2f}x, d {r[f + '_max_rel_diff']:.0e})" for f in forms)
    line = f"{r['model'][6:]} {r['layer']} M {r['m']}: cublaslt {r['cublaslt_tflops']:.0f} TF/s | {cells}"
    if "gate_up_silu_us" in r:
        line += (f" || gate_up + silu: cublaslt+silu_and_mul {r['cublaslt_silu_and_mul_us']:.1f} us, fused "
                 f"{r['gate_up_silu_us']:.1f} us ({r['cublaslt_silu_and_mul_us'] / r['gate_up_silu_us']:.2f}x), "
                 f"{r['gate_up_silu_differ']} outputs differ")
    print(line)
PY
exit "$ok"
