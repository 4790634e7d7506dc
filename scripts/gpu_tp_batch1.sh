#!/usr/bin/env bash
# Batch-1 decode under tensor parallelism, on a multi-GPU machine (device tool, nvidia-h200-x2,
# .deps carried): where TP=2's step time goes.
#   1. build; the all-reduce tests (sums, fused all-reduce + add + RMSNorm = separate ops, times);
#   2. Qwen3-8B dummy batch-1 decode, alternating, ROUNDS times (default 2), by default:
#      TP=1; "shard": one GPU running the per-rank shapes of TP=2 (half the heads, half the MLP,
#      half the vocabulary) with no collectives, i.e. TP=2's compute alone; TP=2 with the fused
#      all-reduce + norm; TP=2 without it (NANOVLLM_ALLREDUCE_NORM=0).
#   TP=2 minus shard is the cost of the collectives; shard against TP=1 / 2 is what the
#   halved kernels lose to fixed per-kernel costs.
#   MODE=throughput: the bench.py workload instead of batch-1 decode (output tok/s, prefill and
#   decode seconds).
#   TIMELINE=1: each run also records its kernel timeline (bench/kernel_timeline.cpp: per kernel, how
#   much it pushes the end of the decode graph replay; idle time between replays), printed per rank.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# TESTS: the ctest -R filter (default: the all-reduce tests).
TARGETS="gpu_tests nanovllm_cli nanovllm_kernel_timeline" bash scripts/gpu_build_test.sh -R "${TESTS:-CudaTensorParallel.(NcclAllReduce|FusedAllReduce)}" \
  --timeout 300 || echo "GPU tests failed"
[ -d /tmp/deps ] && export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
B=build-gpu/nanovllm
SHARD=/tmp/qwen3-8b-tp2-shard
mkdir -p "$SHARD"
cat > "$SHARD/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096, "intermediate_size": 6144, "num_hidden_layers": 36,
 "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 75968,
 "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "eos_token_id": 151645, "bos_token_id": 151643}
JSON
cat > /tmp/lat_fmt.py <<'PY'
import json, sys
try:
    l = json.loads(sys.stdin.read().strip().splitlines()[-1])
    if l['mode'] == 'throughput':
        print(f"{l['output_tok_s']:.0f} output tok/s ({l['seconds']:.1f} s: prefill {l['prefill_seconds']:.1f}, "
              f"decode {l['decode_seconds']:.1f}), {l['preemptions']} preemptions")
    else:
        print(f"{l['decode_tok_s']:.1f} tok/s ({1000 / l['decode_tok_s']:.3f} ms/step), TTFT {l['ttft_ms_median']:.1f} ms")
except Exception as e:
    print(f"no figures ({e})")
PY
TL=()
MODE_ARGS=(--latency); [ "${MODE:-latency}" = throughput ] && MODE_ARGS=()
lat() {  # lat MODEL TP [VAR=V ...] -> "decode tok/s, TTFT" (MODE=throughput: output tok/s)
  timeout 150 env "${TL[@]}" "${@:3}" $B bench --model "$1" --load-format dummy --device cuda --tensor-parallel-size "$2" "${MODE_ARGS[@]}" \
    2>> "$OUT/lat.err" | python3 /tmp/lat_fmt.py
}
# Runs: arguments "MODEL:TP[:VAR=V,VAR=V...]" (MODEL "shard" = the config above), else the four below.
[ $# -gt 0 ] || set -- qwen3-8b:1 shard:1 qwen3-8b:2 qwen3-8b:2:NANOVLLM_ALLREDUCE_NORM=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for spec in "$@"; do
    IFS=: read -r model tp envs <<< "$spec"
    [ "$model" = shard ] && model=$SHARD
    [ "${TIMELINE:-0}" = 1 ] && rm -f /tmp/tl.*.txt && \
      TL=(CUDA_INJECTION64_PATH=$PWD/build-gpu/libnanovllm_kernel_timeline.so NANOVLLM_TIMELINE_OUT=/tmp/tl)
    echo "round $round: $spec: $(lat "$model" "$tp" ${envs//,/ })"
    for f in $(ls /tmp/tl.*.txt 2>/dev/null); do echo "--- timeline $spec ($f)"; cat "$f"; done
  done
done
tail -5 "$OUT/lat.err"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
