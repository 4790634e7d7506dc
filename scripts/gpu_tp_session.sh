#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine (device tool, nvidia-h200-x2 or larger, .deps carried),
# every step under a time limit (a hung collective must not eat the session):
#   1. build; the CUDA TP tests on Qwen3-0.6B shapes (TP=N vs TP=1 logits and greedy tokens,
#      NCCL all-reduce sum and time);
#   2. the scaling benchmarks of bench/RESULTS.md: Qwen3-8B dummy, bench.py throughput and batch-1
#      latency at TP 1, 2 (and 4 when there are 4 GPUs);
#   3. manual start (--rank, --master-addr/--master-port) vs the automatic start on CUDA;
#   4. the logits test on Qwen3-8B shapes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
# NVLink multicast must stay off on these shared hosts (the communicator forces it too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NGPU=$(nvidia-smi -L | wc -l)
# The TP tests use the Qwen3-0.6B-sized model with transformers' weights (wider top-1 margins).
export NANOVLLM_HF06B_DIR=/tmp/hf06b
(PYTHONUNBUFFERED=1 timeout 200 python3 scripts/make_qwen3_06b_reference.py --out "$NANOVLLM_HF06B_DIR" \
  > "$OUT/hf06b.txt" 2>&1) &
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh -R "NcclAllReduce" --timeout 60
wait
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh -R "CudaTensorParallel" --timeout 200 || echo "TP tests (0.6B) failed"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
B=build-gpu/nanovllm
for tp in 1 2 4; do
  [ "$tp" -le "$NGPU" ] || continue
  M=(--model qwen3-8b --load-format dummy --device cuda --tensor-parallel-size "$tp")
  timeout 150 $B bench "${M[@]}" > "$OUT/bench8b_tp$tp.json" 2> "$OUT/bench8b_tp$tp.err"
  timeout 90 $B bench "${M[@]}" --latency > "$OUT/lat8b_tp$tp.json" 2>> "$OUT/bench8b_tp$tp.err"
  python3 - "$tp" "$OUT/bench8b_tp$tp.json" "$OUT/lat8b_tp$tp.json" <<'PY'
import json, sys
tp, a, b = sys.argv[1:]
try:
    t, l = json.load(open(a)), json.load(open(b))
    print(f"Qwen3-8B TP={tp}: throughput {t['output_tok_s']:.0f} output tok/s ({t['seconds']:.2f} s, "
          f"prefill {t['prefill_seconds']:.2f} s, decode {t['decode_seconds']:.2f} s, {t['preemptions']} preemptions); "
          f"batch-1 decode {l['decode_tok_s']:.0f} tok/s, TTFT {l['ttft_ms_median']:.1f} ms")
except Exception as e:
    print(f"Qwen3-8B TP={tp}: no figures ({e})")
PY
done
# Manual start vs automatic start on CUDA.
python3 - > /tmp/tp_in.jsonl <<'PY'
import json, random
random.seed(5)
for n in (3, 200, 57, 1000):
    print(json.dumps({"prompt_token_ids": [random.randrange(0, 150000) for _ in range(n)], "max_tokens": 24,
                      "temperature": 0, "ignore_eos": True}))
PY
G=(generate --model qwen3-0.6b --load-format dummy --device cuda --input /tmp/tp_in.jsonl --json)
timeout 90 $B "${G[@]}" --tensor-parallel-size 2 > /tmp/tp_auto.jsonl 2> "$OUT/tp_auto.err"; echo "automatic start rc=$?"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout 90 $B generate --model qwen3-0.6b --load-format dummy --device cuda --tensor-parallel-size 2 --nnodes 1 --rank 1 \
  --master-addr 127.0.0.1 --master-port "$port" > /dev/null 2> "$OUT/tp_manual1.err" &
timeout 90 $B "${G[@]}" --tensor-parallel-size 2 --nnodes 1 --rank 0 --master-addr 127.0.0.1 --master-port "$port" \
  > /tmp/tp_manual.jsonl 2> "$OUT/tp_manual0.err"; echo "manual rank 0 rc=$?"
wait
if [ -s /tmp/tp_auto.jsonl ] && cmp -s /tmp/tp_auto.jsonl /tmp/tp_manual.jsonl; then
  echo "manual start = automatic start on CUDA ($(wc -l < /tmp/tp_auto.jsonl) requests)"
else echo "MANUAL START DIFFERS"; tail -3 "$OUT"/tp_*.err; fi
NANOVLLM_TP_MODEL=qwen3-8b timeout 200 build-gpu/tests/gpu_tests --gtest_filter='CudaTensorParallel.LastToken*' 2>&1 | \
  tee "$OUT/tp_8b.txt" | grep -E "^\[gpu\]|FAILED|OK \]"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
