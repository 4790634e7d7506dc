#!/usr/bin/env bash
# The Hopper W4A16 GEMM (int_gemm_wgmma.cu) on the GPU machine, in one call (device tool, .deps
# carried), from the repository root:
#   1. build gpu_tests, nanovllm_cli, int_linear_bench; the INT GEMM tests (TESTS);
#   2. int_linear_bench at T 33..256 (BENCH_T): us of the mma.sync GEMM, the Hopper GEMM (int_gemm=wgmma:
#      64-row tiles), its wide form (int_gemm=wgmma_wide: 128 rows of x a CTA), that form with the
#      weights through shared memory (int_gemm=wgmma_ss), dequantize + cuBLASLt and BF16 per Qwen3-8B
#      layer, and each GEMM's largest difference from dequantize; with NCU=1, ncu's counters of one
#      launch of each kernel of NCU_KERNELS (default "1x1 wide ss": the 64-row form, the wide ones);
#   3. with THROUGHPUT=1: bench.py's workload on Qwen3-8B (dummy), AWQ under each int_gemm of GEMMS
#      (default "auto wgmma_ss") and each int_gemm_cluster of CLUSTERS with auto (default none;
#      only where the tests passed), then BF16; with WGMMA_TP=1 and the tests passed, int_gemm=wgmma.
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
    t = tot.setdefault(r["T"], [0.0] * 6)
    for i, k in enumerate(["mma_us", "wgmma_us", "wgmma_ss_us", "wgmma_wide_us", "dequant_us", "bf16_us"]):
        t[i] += r[k]
    print(f"{r['layer']:7s} T {r['T']:3d}: mma {r['mma_us']:7.2f}  wgmma {r['wgmma_us']:7.2f} "
          f"({r['wgmma_TFLOP_s']:5.0f} TF/s) ss {r['wgmma_ss_us']:7.2f} wide {r['wgmma_wide_us']:7.2f}  "
          f"dequant {r['dequant_us']:7.2f}  bf16 {r['bf16_us']:7.2f}  splits {r['splits']}  "
          f"diff mma {r['mma_dequant_max_rel_diff']:.1e} wgmma {r['wgmma_dequant_max_rel_diff']:.1e} "
          f"ss {r['wgmma_ss_dequant_max_rel_diff']:.1e} wide {r['wgmma_wide_dequant_max_rel_diff']:.1e}")
for T, (a, b, b2, b4, c, d) in sorted(tot.items()):
    print(f"layer sum T {T:3d}: mma {a:7.2f}  wgmma {b:7.2f} ss {b2:7.2f} wide {b4:7.2f}  dequant {c:7.2f}  "
          f"bf16 {d:7.2f} us  (bf16/wgmma {d / b:.2f}x, ss {d / b2:.2f}x, wide {d / b4:.2f}x)")
PY
# NCU=1: one launch of each Hopper GEMM of NCU_KERNELS (RxC: the 64-row form in clusters of R x C;
# wide: the wide form; ss: int_gemm_wgmma_ss.cu) on qkv at T 256 (the 6th launch: after the warm-up): speed of light, L2 /
# tensor-pipe counters, warp state. Is the kernel bound by L2, by the tensor pipe or by latency?
if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  for k in ${NCU_KERNELS:-1x1 wide ss}; do
    re="int_gemm_wgmma_kernel<.int.${k%x*}, .int.${k#*x}>"
    [ "$k" = wide ] && re=int_gemm_wgmma_wide_kernel
    [ "$k" = ss ] && re=int_gemm_wgmma_ss_kernel
    timeout 150 ncu --clock-control none --kernel-name-base demangled -k "regex:$re" --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --section Occupancy --section ComputeWorkloadAnalysis \
      build-gpu/tests/int_linear_bench 256 > "$OUT/ncu_$k.txt" 2>&1
    echo "== ncu int_gemm_wgmma_kernel $k qkv T 256 (rc $?)"
    grep -E "Duration|Throughput|L2 Hit|Pipe|Max Bandwidth|Mem Busy|Stall|Warp Cycles|Issued|Eligible|Active Warps|Achieved Occupancy|No Eligible" \
      "$OUT/ncu_$k.txt" | head -40
  done
fi
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
for g in ${GEMMS:-auto wgmma_ss}; do tp "awq_$g" --quantization awq --kernel-options "int_gemm=$g"; done
if [ "$ok" = 0 ]; then
  for c in ${CLUSTERS:-}; do tp "awq_auto_c$c" --quantization awq --kernel-options "int_gemm=auto,int_gemm_cluster=$c"; done
fi
tp bf16 --quantization none
# The Hopper kernel only where its tests passed.
[ "$ok" = 0 ] && [ -n "${WGMMA_TP:-}" ] && tp awq_wgmma --quantization awq --kernel-options int_gemm=wgmma
exit "$ok"
