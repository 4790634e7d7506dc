#!/usr/bin/env bash
# The q/k norm + RoPE token kernel (qk_norm_rope_tokens.cu) on the GPU machine, in one call (device
# tool, .deps carried):  bash scripts/gpu_check_rope.sh
#   1. build; the op's GPU tests: the token kernel bit for bit against the head kernel at T = 16,384
#      and 4,097 and odd heads, and against the CPU (CudaQkNormRope.*), plus the existing q/k norm +
#      RoPE tests (CudaOps.QkNormRope, CudaOps.AddBiasAndRopeWithoutNorm, CudaFused.QkNormRopeStore*,
#      CudaFp8KV.FusedNormRopeStoreWritesCodes), which now run the token kernel where auto picks it;
#   2. rope_bench: microseconds per call, head vs token kernel, Qwen3-0.6B and Qwen3-8B heads, T 1..16,384;
#   3. `nanovllm bench --embed` (Qwen3-0.6B, dummy weights, 16K-token steps) with rope_kernel=head
#      and auto, alternating, ROUNDS times (default 2);
#   4. the CUPTI timeline of one embed run per kernel: the q/k norm + RoPE kernels' calls and time.
# Writes logs under $OUT; prints a short summary.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
echo "== build and tests"
TARGETS="gpu_tests nanovllm_cli rope_bench nanovllm_kernel_timeline" bash scripts/gpu_build_test.sh \
  -R 'CudaQkNormRope|CudaOps.QkNormRope|CudaOps.AddBiasAndRope|CudaFused.QkNormRope|CudaFp8KV.FusedNormRope' \
  2>&1 | tail -25 || true
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.txt" 2>/dev/null | head -20
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
[ -x build-gpu/tests/rope_bench ] || { echo "no rope_bench: build failed"; exit 4; }
echo "== rope_bench (us per call; graphs of back-to-back calls)"
build-gpu/tests/rope_bench > "$OUT/rope_bench.jsonl" 2>&1
python3 - "$OUT/rope_bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        print(line.rstrip()); continue
    print(f"{r['model']:11s} T {r['T']:6d}: head {r['head_us']:8.2f} us  token {r['token_us']:8.2f} us  "
          f"(x{r['token_speedup']:.2f}, {r['token_GB_s']:.0f} vs {r['head_GB_s']:.0f} GB/s)  auto={r['auto']} {r['auto_us']:.2f} us")
PY
B=build-gpu/nanovllm
EMB=(bench --embed --model qwen3-0.6b --load-format dummy --max-model-len 1024)
echo "== nanovllm bench --embed (seconds; lower is better)"
rm -f "$OUT/embed.txt"
for r in $(seq "${ROUNDS:-2}"); do
  for k in head auto; do
    line=$($B "${EMB[@]}" --kernel-options rope_kernel=$k 2>>"$OUT/embed_err.txt" | tail -1)
    echo "$r $k $line" >> "$OUT/embed.txt"
  done
done
python3 - "$OUT/embed.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r, k, rest = line.split(" ", 2)
    try:
        d = json.loads(rest)
        print(f"round {r} rope_kernel={k:5s}: {d['seconds']:.3f} s, {d['tokens_per_s']:.0f} tok/s")
    except ValueError:
        print(f"round {r} rope_kernel={k}: no result: {rest.strip()[:200]}")
PY
echo "== CUPTI timeline, one embed run per kernel (eager kernels: calls, total, mean)"
for k in head auto; do
  rm -f /tmp/tl_rope.*
  CUDA_INJECTION64_PATH=build-gpu/libnanovllm_kernel_timeline.so NANOVLLM_TIMELINE_OUT=/tmp/tl_rope \
    $B "${EMB[@]}" --kernel-options rope_kernel=$k >/dev/null 2>>"$OUT/embed_err.txt"
  cp /tmp/tl_rope.* "$OUT/timeline_$k.txt" 2>/dev/null
  echo "-- rope_kernel=$k"
  grep -iE "qk_norm_rope|eager kernels" "$OUT/timeline_$k.txt" 2>/dev/null | head -6
done
