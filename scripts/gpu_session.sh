#!/usr/bin/env bash
# One GPU session on the device machine: build, every GPU test (including transformers at
# Qwen3-0.6B size, whose reference is generated here first), then the benchmarks of
# bench/RESULTS.md. Logs and JSON figures land in $OUT. Run from the repository root with .deps
# carried (see scripts/gpu_build_test.sh):   bash scripts/gpu_session.sh [quick]
# quick: the tests without the slowest op sweeps (SWEEPS below) and without the benchmarks: one
# 600 s device call; the full run (no argument) takes two or more.
# The fixtures the GPU tests read are made here, while the build runs: the Qwen3-0.6B-size random
# model with transformers' reference (NANOVLLM_HF06B_DIR), then transformers' FP8 checkpoint of it
# (NANOVLLM_FP8_DIR) and its AWQ / GPTQ / compressed-tensors checkpoints with transformers'
# reference on their dequantized weights (scripts/make_quantized_checkpoint.py, one per scheme below,
# NANOVLLM_INT_CKPT_DIRS); the tests that read them run once they exist. The Python package is built
# too (python_test_gpu imports it).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export NANOVLLM_HF06B_DIR=/tmp/hf06b NANOVLLM_FP8_DIR=/tmp/fp8-06b
# name: make_quantized_checkpoint.py flags (the formats' usual schemes, act order, 8 bits, channel).
INT_CKPTS=("awq-g128:--format awq --group-size 128"
           "gptq-g128-actorder:--format gptq --group-size 128 --desc-act"
           "gptq8-channel-asym:--format gptq --bits 8 --group-size -1 --asym"
           "ct-w4a16-g128:--format compressed-tensors --group-size 128"
           "ct-w8a16-channel:--format compressed-tensors --bits 8 --group-size -1"
           "ct-fp8:--format compressed-tensors --fp8")
NANOVLLM_INT_CKPT_DIRS=$(printf '/tmp/int-06b-%s:' "${INT_CKPTS[@]%%:*}")
export NANOVLLM_INT_CKPT_DIRS=${NANOVLLM_INT_CKPT_DIRS%:}
# The checkpoints derive from the reference model, each on its own (side by side: one after another
# they took most of a 600 s call, 2026-11-30).
(export PYTHONUNBUFFERED=1
 python3 scripts/make_qwen3_06b_reference.py --out "$NANOVLLM_HF06B_DIR" > "$OUT/hf06b.txt" 2>&1; echo "rc=$?" >> "$OUT/hf06b.txt"
 (python3 scripts/make_fp8_checkpoint.py --src "$NANOVLLM_HF06B_DIR" --out "$NANOVLLM_FP8_DIR" > /tmp/ckpt-fp8.log 2>&1
  echo "fp8 rc=$?" >> /tmp/ckpt-fp8.log) &
 for c in "${INT_CKPTS[@]}"; do
   # shellcheck disable=SC2086  # the flags split into words
   (python3 scripts/make_quantized_checkpoint.py --src "$NANOVLLM_HF06B_DIR" --out "/tmp/int-06b-${c%%:*}" ${c#*:} \
      > "/tmp/ckpt-${c%%:*}.log" 2>&1
    echo "${c%%:*} rc=$?" >> "/tmp/ckpt-${c%%:*}.log") &
 done
 wait
 for c in fp8 "${INT_CKPTS[@]%%:*}"; do cat "/tmp/ckpt-$c.log" >> "$OUT/hf06b.txt"; done) &
ref_pid=$!
# The tests that read the references made above (NANOVLLM_HF06B_DIR and the checkpoints of it): they
# wait for them (on a warm machine the build no longer outlasts them).
FIXTURE_TESTS="HFQwen3|CudaEngineModes|Fp8CheckpointFromTransformers|IntCheckpointsFromTransformers|Qwen3_06BSize"
# quick leaves out the op-level sweeps whose time is their CPU references (awkward-shape attention
# on every prefill kernel, the FP8 KV cache's, the INT MoE checkpoints, the FP32 CPU engine of the
# pooling test: 324 s beside the reference makers, 2026-11-30): with them the whole run
# no longer fits one 600 s device call (2026-11-30: ~550 s before the fixture group started).
SWEEPS="CudaFp8KV\.(Prefill|Decode)AwkwardShapes|CudaFp8KV\.PrefillMmaRowsPerWarp|CudaIntMoe\.CheckpointsAgainstTheCpu"
SWEEPS+="|CudaAttention\.(PrefillTensorCoreAwkwardShapes|SlidingWindow)|CudaPooling\.EmbeddingsEqualTheCpu"
EXCLUDE="$FIXTURE_TESTS"
[ "${1:-}" = quick ] && EXCLUDE+="|$SWEEPS"
TARGETS="gpu_tests nanovllm_cli nanovllm_python_package" bash scripts/gpu_build_test.sh -E "$EXCLUDE"
wait $ref_pid
echo "gpu_session: references made at ${SECONDS} s"
tail -9 "$OUT/hf06b.txt"
# The carried dev packages (openblas, ...) for the binaries built above.
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
# One at a time: most of them size their KV cache by gpu_memory_utilization 0.5, which counts
# the memory other processes hold. quick leaves out the CPU backend's run on the checkpoints (a
# CPU test; the full run has it).
echo "gpu_session: fixture group starts at ${SECONDS} s"
FIXTURE_EXCLUDE=NONE
[ "${1:-}" = quick ] && FIXTURE_EXCLUDE="IntCheckpointsFromTransformers\.CpuBackendOnTheSmallerOnes"
ctest --test-dir build-gpu -R "$FIXTURE_TESTS" -E "$FIXTURE_EXCLUDE" --output-on-failure --timeout 600 2>&1 | tee "$OUT/ctest_hf.txt" | tail -30
grep -h "cosine\|identical across" build-gpu/Testing/Temporary/LastTest.log | head -20
[ "${1:-}" = quick ] && exit 0
B=build-gpu/nanovllm
M=(--model qwen3-0.6b --load-format dummy --device cuda)
# One JSON line per benchmark, in one file (the device tool brings back a limited number of files).
$B bench "${M[@]}" | tee "$OUT/bench.jsonl"
$B bench "${M[@]}" --latency | tee -a "$OUT/bench.jsonl"
$B bench "${M[@]}" --profile-decode 256 | tee -a "$OUT/bench.jsonl"
$B bench "${M[@]}" --enforce-eager | tee -a "$OUT/bench.jsonl"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
