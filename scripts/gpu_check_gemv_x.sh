#!/usr/bin/env bash
# The INT4 GEMV's x loads (v3 / v4 prefetching each warp's x run into L1 after griddepcontrol.wait)
# on the GPU machine, in one call (device tool, .deps carried), from the repository root:
#   1. build gpu_tests, nanovllm_cli, int_linear_bench; CudaIntWeights.* (v4 still equals v3 bit for bit);
#   2. int_linear_bench 1 4 8: us of v2 (unchanged: the control), v3, v4 and BF16;
#   3. ncu (NCU=1) on one launch each: v4 qkv, v3 o, v3 down at T = 1;
#   4. Qwen3-8B (dummy) batch-1 decode tok/s: AWQ (v4, the default) and BF16, alternating (ROUNDS).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli int_linear_bench" bash scripts/gpu_build_test.sh -R 'CudaIntWeights' ||
  echo "GPU tests FAILED (rc $?)"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.txt" | tail -12

cat > /tmp/gemv_fmt.py <<'PY'
import json, sys
tot = {}
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "v4_us" not in r:
        continue
    t = tot.setdefault(r["T"], [0.0] * 4)
    for i, k in enumerate(["v2_us", "v3_us", "v4_us", "bf16_us"]):
        t[i] += r[k]
    print(f"{r['layer']:7s} T {r['T']:2d}: v2 {r['v2_us']:6.2f}  v3 {r['v3_us']:6.2f} ({r['v3_GB_s']:5.0f} GB/s)  "
          f"v4 {r['v4_us']:6.2f} ({r['v4_GB_s']:5.0f} GB/s)  bf16 {r['bf16_us']:6.2f}  v4-v3 diff {r['v4_v3_max_rel_diff']:.1e}")
for T, (a, b, c, d) in sorted(tot.items()):
    print(f"layer sum T {T:2d}: v2 {a:6.2f}  v3 {b:6.2f}  v4 {c:6.2f}  bf16 {d:6.2f} us  (bf16/v4 {d / c:.2f}x)")
PY
for r in 1 2; do
  echo "== int_linear_bench round $r"
  timeout 200 build-gpu/tests/int_linear_bench 1 4 8 > "$OUT/int_linear_bench$r.jsonl" 2> "$OUT/int_linear_bench$r.err"
  echo "(rc $?)"
  python3 /tmp/gemv_fmt.py < "$OUT/int_linear_bench$r.jsonl"
done

if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  prof() {  # NAME KERNEL_REGEX SKIP
    timeout 150 ncu --clock-control none -k "regex:$2" --launch-skip "$3" --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section LaunchStats build-gpu/tests/int_linear_bench 1 > "$OUT/ncu_$1.txt" 2>&1
    echo "== ncu $1 (rc $?)"
    grep -E "int_gemv|Grid Size|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issued Warp Per|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu_$1.txt" | head -24
    grep -iE "stall|long scoreboard|latency" "$OUT/ncu_$1.txt" | head -6
  }
  prof v4_qkv int_gemv_v4 20
  prof v3_o int_gemv_v3 250
  prof v3_down int_gemv_v3 860
fi

echo "== Qwen3-8B batch-1 decode (dummy weights)"
run() {  # NAME ARGS...
  local name=$1
  shift
  timeout 300 build-gpu/nanovllm bench --model qwen3-8b --load-format dummy --device cuda --latency "$@" \
    > "$OUT/decode_$name.jsonl" 2> "$OUT/decode_$name.err"
  local rc=$?
  python3 - "$name" "$rc" "$OUT/decode_$name.jsonl" <<'PY'
import json, sys
name, rc, path = sys.argv[1:4]
try:
    l = json.loads(open(path).read().strip().splitlines()[-1])
    print(f"{name:8s}: decode_tok_s {l['decode_tok_s']:.1f}")
except Exception as e:
    print(f"{name:8s}: no figure (rc {rc}, {e})")
PY
  [ "$rc" = 0 ] || tail -3 "$OUT/decode_$name.err"
}
for r in $(seq 1 "${ROUNDS:-1}"); do
  run "awq$r" --quantization awq
  run "bf16$r" --quantization none
done
