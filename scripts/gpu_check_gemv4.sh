#!/usr/bin/env bash
# The persistent INT4 GEMV (int_gemv=v4, int_gemv_v4.cu) on the GPU machine, in one call (device
# tool, .deps carried), from the repository root:
#   1. build gpu_tests, nanovllm_cli and int_linear_bench; the INT weight tests (CudaIntWeights.*:
#      every GEMV against the reference, V4EqualsV3BitForBit);
#   2. the GEMV micro-benchmark at T 1, 4, 8 on Qwen3-8B's layers: us of v3, v4 and the BF16
#      linear, v4's GB/s of INT4 weight bytes, v3 / v4, and v4's largest difference from v3 (must
#      be 0: bit for bit) -> $OUT/int_linear_bench.jsonl;
#   3. Qwen3-8B (dummy weights) batch-1 decode tok/s: AWQ with int_gemv=v3, AWQ with v4, BF16.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli int_linear_bench" bash scripts/gpu_build_test.sh -R 'CudaIntWeights' ||
  echo "GPU tests FAILED (rc $?)"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.txt" | tail -12

echo "== int_linear_bench (us per call; v4 GB/s of INT4 bytes; v4-v3 max relative difference)"
cat > /tmp/gemv4_fmt.py <<'PY'
import json, sys
tot = {}
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "v4_us" not in r:
        continue
    t = tot.setdefault(r["T"], [0.0, 0.0, 0.0])
    t[0] += r["v3_us"]; t[1] += r["v4_us"]; t[2] += r["bf16_us"]
    print(f"{r['layer']:7s} T {r['T']:2d}: v3 {r['v3_us']:6.2f}  v4 {r['v4_us']:6.2f} ({r['v4_GB_s']:5.0f} GB/s, "
          f"grid {r['v4_grid']})  bf16 {r['bf16_us']:6.2f}  v3/v4 {r['v4_over_v3']:.2f}  "
          f"diff {r['v4_v3_max_rel_diff']:.1e}")
for T, (a, b, c) in sorted(tot.items()):
    print(f"layer sum T {T:2d}: v3 {a:6.2f}  v4 {b:6.2f}  bf16 {c:6.2f} us  (bf16/v3 {c / a:.2f}x, bf16/v4 {c / b:.2f}x)")
PY
timeout 240 build-gpu/tests/int_linear_bench 1 4 8 > "$OUT/int_linear_bench.jsonl" 2> "$OUT/int_linear_bench.err"
echo "(rc $?)"
python3 /tmp/gemv4_fmt.py < "$OUT/int_linear_bench.jsonl"

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
run awq_v3 --quantization awq --kernel-options int_gemv=v3
run awq_v4 --quantization awq --kernel-options int_gemv=v4
run bf16 --quantization none
