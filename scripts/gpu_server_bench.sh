#!/usr/bin/env bash
# On the GPU machine (device tool, .deps carried): builds, runs the GPU tests, then bench.py's
# workload offline (`nanovllm bench`) and over HTTP (`nanovllm serve --skip-tokenizer-init` +
# scripts/bench_server_http.py: 256 concurrent token-id requests) in the same call, for the
# HTTP / offline ratio of bench/RESULTS.md. Usage: bash scripts/gpu_server_bench.sh [ctest args]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh "$@"
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
B=build-gpu/nanovllm
M=(--model qwen3-0.6b --load-format dummy --device cuda)
$B bench "${M[@]}" | tee "$OUT/offline.json"
$B serve "${M[@]}" --skip-tokenizer-init --port 18000 > "$OUT/serve.txt" 2>&1 &
srv=$!
for _ in $(seq 1 120); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:18000/health', timeout=1)" 2>/dev/null && break
  sleep 1
done
python3 scripts/bench_server_http.py --base http://127.0.0.1:18000 | tee "$OUT/http.json"
python3 scripts/bench_server_http.py --base http://127.0.0.1:18000 --stream | tee -a "$OUT/http.json"
kill "$srv"; wait "$srv"
tail -3 "$OUT/serve.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
