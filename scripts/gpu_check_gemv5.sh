#!/usr/bin/env bash
# The INT4 GEMV v5 (int_gemv_v5.cu: v4 with its rings in shared memory, twice the warps an SM) on
# the GPU machine, in one call (device tool, .deps carried), from the repository root:
#   1. build gpu_tests, nanovllm_cli, int_linear_bench; CudaIntWeights.* (every GEMV against the
#      reference, V5MatchesV3OnPersistentGrids, V4EqualsV3BitForBit);
#   2. int_linear_bench 1 4 8 (ROUNDS_BENCH rounds): us of v2, v3, v4, v5 and BF16, v5's GB/s and its
#      largest difference from v3;
#   3. Qwen3-8B (dummy) batch-1 decode tok/s: AWQ under each int_gemv of GEMVS (default "auto v4"),
#      then BF16 (ROUNDS rounds, alternating);
#   4. with EMBED_TOKENS (e.g. "4096 16384"): the embeddings benchmark (1,000 x 512 tokens, Qwen3-0.6B
#      shape) at each --max-num-batched-tokens.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli int_linear_bench" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaIntWeights}" ||
  echo "GPU tests FAILED (rc $?)"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.txt" | tail -12
grep -E "v5 against v3|Failure|worst error" "$OUT/LastTest.log" | head -20

cat > /tmp/gemv_fmt.py <<'PY'
import json, sys
tot = {}
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "v5_us" not in r:
        continue
    t = tot.setdefault(r["T"], [0.0] * 6)
    for i, k in enumerate(["v2_us", "v3_us", "v4_us", "v5_us", "auto_us", "bf16_us"]):
        t[i] += r[k]
    print(f"{r['layer']:7s} T {r['T']:2d}: v2 {r['v2_us']:6.2f}  v3 {r['v3_us']:6.2f}  v4 {r['v4_us']:6.2f}  "
          f"v5 {r['v5_us']:6.2f}  auto {r['auto_us']:6.2f} ({r['auto_GB_s']:5.0f} GB/s)  bf16 {r['bf16_us']:6.2f}  "
          f"v5-v3 {r['v5_v3_max_rel_diff']:.1e}")
for T, (a, b, c, d, e, f) in sorted(tot.items()):
    print(f"layer sum T {T:2d}: v2 {a:6.2f}  v3 {b:6.2f}  v4 {c:6.2f}  v5 {d:6.2f}  auto {e:6.2f}  bf16 {f:6.2f} us  "
          f"(bf16/v4 {f / c:.2f}x, bf16/auto {f / e:.2f}x)")
PY
for r in $(seq 1 "${ROUNDS_BENCH:-1}"); do
  echo "== int_linear_bench round $r"
  timeout 200 build-gpu/tests/int_linear_bench ${BENCH_T:-1 4 8} > "$OUT/bench$r.jsonl" 2> "$OUT/bench$r.err"
  echo "(rc $?)"; tail -3 "$OUT/bench$r.err"
  python3 /tmp/gemv_fmt.py < "$OUT/bench$r.jsonl"
done

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
  for g in ${GEMVS:-auto v4}; do run "awq_${g}_$r" --quantization awq --kernel-options "int_gemv=$g"; done
  run "bf16_$r" --quantization none
done

for n in ${EMBED_TOKENS:-}; do
  timeout 200 build-gpu/nanovllm bench --embed --model qwen3-0.6b --load-format dummy --device cuda \
    --max-model-len 1024 --max-num-batched-tokens "$n" > "$OUT/embed_$n.jsonl" 2> "$OUT/embed_$n.err"
  echo "embed, steps of $n tokens (rc $?): $(tail -1 "$OUT/embed_$n.jsonl" | cut -c 1-300)"
done
if [ -n "${EMBED_TOKENS:-}" ] && [ "${EMBED_PEER:-1}" = 1 ]; then
  timeout 200 python3 scripts/bench_embed_transformers.py --batch 256 > "$OUT/embed_hf.jsonl" 2> "$OUT/embed_hf.err"
  echo "embed, transformers batch 256 (rc $?): $(tail -1 "$OUT/embed_hf.jsonl" | cut -c 1-300)"
fi
