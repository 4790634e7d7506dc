#!/usr/bin/env bash
# The main job: build, then generate with the built-in qwen3-0.6b preset on random weights and
# run a scaled-down bench.py workload. No download needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/nanovllm generate --model qwen3-0.6b --load-format dummy --prompt "Hello, my name is" \
  --max-tokens 16 --temperature 0.6 --seed 0
./build/nanovllm bench --model qwen3-0.6b --load-format dummy --num-seqs 2 --max-output-len 100 \
  --max-input-len 100
