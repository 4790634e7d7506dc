#!/usr/bin/env bash
set -u
S=$OUT/summary.txt; : > $S
t0=$(date +%s); el() { echo "[t+$(( $(date +%s) - t0 ))s] $*" >> $S; }
OUT=/tmp/bo TARGETS="nanovllm nanovllm_kernel_timeline" bash scripts/gpu_build_test.sh -R NONE_XX > /tmp/build.log 2>&1; tail -1 /tmp/build.log >> $S; el built
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread
B=build-gpu/nanovllm
lat() { local tag=$1 m=$2; shift 2
  echo "$tag $m: $(timeout 150 $B bench --model $m --load-format dummy --device cuda --latency --latency-prompt-len 1024 --latency-output-len 128 --max-model-len 4096 "$@" 2>&1 | tail -1 | grep -oE '"(decode_tok_s|ttft_ms_median)":[0-9.]+' | tr '\n' ' ')" >> $S; }
lat warm qwen3-8b -q fp8
for o in max_decode_splits=16 max_decode_splits=8 max_decode_splits=4 decode_cluster=off max_decode_splits=2 max_decode_splits=16; do
  lat "$o" qwen3-8b -q fp8 --kernel-options $o
done; el 8b
for o in max_decode_splits=16 max_decode_splits=8 max_decode_splits=4 decode_cluster=off; do
  lat "$o" qwen3-0.6b --kernel-options $o
done; el 06b
CUDA_INJECTION64_PATH=build-gpu/libnanovllm_kernel_timeline.so NANOVLLM_TIMELINE_OUT=$OUT/tl NANOVLLM_TIMELINE_SEQ=24 timeout 120 $B bench --model qwen3-8b -q fp8 --load-format dummy --device cuda --latency --latency-prompt-len 1024 --latency-output-len 64 --max-model-len 4096 > /tmp/tl.log 2>&1; el "timeline rc=$?"
