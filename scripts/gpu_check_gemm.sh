#!/usr/bin/env bash
# Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) on the GPU machine, in one call (device tool,
# .deps carried), from the repository root: builds gpu_tests and gemm_bench, runs CudaGemmWgmma.*
# (every form against a double product; the fused gate_up + SiLU against the GEMM + silu_and_mul),
# then gemm_bench at M rows (GEMM_M, default "4096 16384"): one line per (model, layer, M) with
# TFLOP/s of cuBLASLt and of each form, and for gate_up cuBLASLt + silu_and_mul against the fused
# form. The JSON lines stay in $OUT/gemm.jsonl. EMBED_GEMMS (e.g. "cublaslt wgmma"): then
# `nanovllm bench --embed` (1,000 inputs of 512 tokens, Qwen3-0.6B shapes, dummy weights) under each
# gemm= kernel option, alternating ROUNDS times (default 2), and with PEER=1 transformers' batched
# bf16 forward on the same inputs once (scripts/bench_embed_transformers.py --batch 64); with
# TIMELINE=1 one more embed run per gemm= value under the CUPTI kernel timeline (the top kernels by
# time). GEMM_M=none skips gemm_bench.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests gemm_bench${EMBED_GEMMS:+ nanovllm_cli nanovllm_kernel_timeline}" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaGemmWgmma}"
ok=$?
grep -E "tests passed|tests failed|\*\*\*" "$OUT/ctest.txt" | tail -5
grep -E "\[gpu\] gemm_wgmma|Failure|Expected|Which is" "$OUT/LastTest.log" | head -40
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
[ "${GEMM_M:-}" = none ] || timeout 300 build-gpu/tests/gemm_bench ${GEMM_M:-4096 16384} > "$OUT/gemm.jsonl" 2> "$OUT/gemm.err"
echo "== gemm_bench (rc $?)"; tail -3 "$OUT/gemm.err"
python3 - "$OUT/gemm.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    silu = [k[:-3] for k in r if k.startswith("gate_up_silu") and k.endswith("_us")]
    forms = [k[:-3] for k in r if k.endswith("_us") and k not in ("cublaslt_us", "cublaslt_silu_and_mul_us") and k[:-3] not in silu]
    cells = " | ".join(f"{f} {r[f + '_tflops']:.0f} ({r[f + '_tflops'] / r['cublaslt_tflops']:.2f}x, d {r[f + '_max_rel_diff']:.0e})" for f in forms)
    line = f"{r['model'][6:]} {r['layer']} M {r['m']} (pairs: {r.get('pair_ctas', 0)} CTAs): cublaslt {r['cublaslt_tflops']:.0f} TF/s | {cells}"
    if silu:
        line += f" || gate_up + silu: cublaslt+silu_and_mul {r['cublaslt_silu_and_mul_us']:.1f} us"
        for f in silu:
            line += (f", {f} {r[f + '_us']:.1f} us ({r['cublaslt_silu_and_mul_us'] / r[f + '_us']:.2f}x, "
                     f"{r[f + '_differ']} differ)")
    print(line)
PY
for r in $(seq "${ROUNDS:-2}"); do
  for g in ${EMBED_GEMMS:-}; do
    printf "== embed gemm=%s: " "$g"
    build-gpu/nanovllm bench --embed --model qwen3-0.6b --load-format dummy --max-model-len 1024 \
      --kernel-options "gemm=$g" 2>"$OUT/embed_$g.err" | tee -a "$OUT/embed_bench.jsonl" || tail -3 "$OUT/embed_$g.err"
  done
done
if [ "${TIMELINE:-0}" = 1 ]; then
  for g in ${EMBED_GEMMS:-}; do
    rm -f /tmp/tl_gemm.*
    CUDA_INJECTION64_PATH=build-gpu/libnanovllm_kernel_timeline.so NANOVLLM_TIMELINE_OUT=/tmp/tl_gemm \
      build-gpu/nanovllm bench --embed --model qwen3-0.6b --load-format dummy --max-model-len 1024 \
      --kernel-options "gemm=$g" >/dev/null 2>>"$OUT/embed_$g.err"
    cat /tmp/tl_gemm.* > "$OUT/timeline_$g.txt" 2>/dev/null
    echo "== timeline gemm=$g"
    head -30 "$OUT/timeline_$g.txt"
  done
fi
if [ "${PEER:-0}" = 1 ]; then
  echo "== transformers"
  python3 scripts/bench_embed_transformers.py --batch 64 | tee -a "$OUT/embed_bench.jsonl"
fi
exit "$ok"
