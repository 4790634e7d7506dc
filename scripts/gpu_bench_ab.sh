#!/usr/bin/env bash
# A/B timing on the GPU machine: the batch-1 latency and bench.py throughput benchmarks, each run
# under every --kernel-options value given (alternating, twice), e.g.
#   bash scripts/gpu_bench_ab.sh pdl=on pdl=off
# (A/B of source changes instead: scripts/gpu_ab_ref.sh.)
# Needs build-gpu/nanovllm (scripts/gpu_build_test.sh or gpu_session.sh); prints one line per run.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
B=build-gpu/nanovllm
M=(--model "${AB_MODEL:-qwen3-0.6b}" --load-format dummy --device cuda)
for round in 1 2; do
  for setting in "$@"; do
    lat=$($B bench "${M[@]}" --kernel-options "$setting" --latency 2>/dev/null | tail -1)
    # shellcheck disable=SC2086  # extra arguments split into words
    thr=$($B bench "${M[@]}" --kernel-options "$setting" ${AB_THROUGHPUT_ARGS:-} 2>/dev/null | tail -1)
    python3 - "$setting" "$round" "$lat" "$thr" <<'PY'
import json, sys
s, r, lat, thr = sys.argv[1:]
l, t = json.loads(lat), json.loads(thr)
print(f"{s:24s} round {r}: batch-1 decode {l['decode_tok_s']:.0f} tok/s, TTFT {l['ttft_ms_median']:.1f} ms; "
      f"throughput {t['output_tok_s']:.0f} tok/s ({t['seconds']:.2f} s)")
PY
  done
done
