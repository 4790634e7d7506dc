#!/usr/bin/env bash
# Issue 18's figures on the GPU machine (device tool, .deps carried), one JSON line each in $OUT:
#   bash scripts/gpu_serving.sh tests        build, every GPU test (transformers reference made here)
#   bash scripts/gpu_serving.sh interference long-prompt interference, Qwen3-8B dummy (bench --interference)
#   bash scripts/gpu_serving.sh sweep        bench-serve rate sweep, Qwen3-0.6B dummy, 512 in / 128 out
#   bash scripts/gpu_serving.sh throughput   bench.py workload, chunked prefill on and off
#   bash scripts/gpu_serving.sh prefix       bench.py workload behind a shared SHARED_PREFIX-token (100) system
#                                            prompt, prefix caching on and off: hit rate and throughput
#   bash scripts/gpu_serving.sh interference_http  the interference scenario through `serve` (HTTP), Qwen3-8B dummy,
#                                            configurations HTTP_CONFIGS (default: serve's defaults)
#   bash scripts/gpu_serving.sh soak         serve (its defaults, Qwen3-0.6B dummy) under scripts/soak_server.py for
#                                            SOAK_MINUTES (30) at SOAK_RATE (8) req/s: RSS and KV gauges
# Several modes may be given in one call. Env: RATES ("20 50 100 inf"), NUM_PROMPTS (500), and the
# engine configurations compared, as "label:flag,flag...;label:..." (commas become spaces):
# INTERFERENCE_CONFIGS (default: budgets 16384, 2048, 1024, 768, 512 and prefill-first),
# IMODEL, ISTREAMS, ICONTEXT, IPROMPT (interference: qwen3-8b, 64 streams of 1024 tokens, 32000);
# SWEEP_CONFIGS (default: chunked prefill at 16384 and 2048 tokens, prefill-first).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
B=build-gpu/nanovllm
deps_path() {
  if [ -d /tmp/deps ]; then
    export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
  fi
}

wait_health() {
  for _ in $(seq 1 180); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=1)" 2>/dev/null &&
      return 0
    sleep 1
  done
  return 1
}

# A fresh machine has no build: the benchmark modes build the CLI first.
ensure_built() {
  [ -x "$B" ] && return 0
  TARGETS=nanovllm_cli bash scripts/gpu_build_test.sh -R NONE > "$OUT/build_cli.txt" 2>&1
  [ -x "$B" ] || { tail -20 "$OUT/build_cli.txt"; exit 4; }
}

for mode in "$@"; do
  [ "$mode" = tests ] || ensure_built
  case "$mode" in
    tests)
      export NANOVLLM_HF06B_DIR=/tmp/hf06b
      [ -f /tmp/hf06b/prompts.json ] ||
        (PYTHONUNBUFFERED=1 python3 scripts/make_qwen3_06b_reference.py --out /tmp/hf06b > "$OUT/hf06b.txt" 2>&1) &
      ref=$!
      TARGETS="gpu_tests nanovllm_cli" bash scripts/gpu_build_test.sh -E "HFQwen3|CudaEngineModes"
      wait $ref
      deps_path
      ctest --test-dir build-gpu -R "HFQwen3|CudaEngineModes" --output-on-failure --timeout 600 2>&1 |
        tee "$OUT/ctest_hf.txt" | tail -30
      grep -h "cosine\|identical across" build-gpu/Testing/Temporary/LastTest.log | head
      ;;
    interference)
      deps_path
      M=(--model "${IMODEL:-qwen3-8b}" --load-format dummy --device cuda --interference-streams "${ISTREAMS:-64}"
        --interference-context "${ICONTEXT:-1024}" --interference-prompt-len "${IPROMPT:-32000}")
      IFS=';' read -ra configs <<< "${INTERFERENCE_CONFIGS:-b16384:--max-num-batched-tokens,16384;b2048:--max-num-batched-tokens,2048;b1024:--max-num-batched-tokens,1024;b768:--max-num-batched-tokens,768;b512:--max-num-batched-tokens,512;prefill_first:--no-enable-chunked-prefill}"
      for c in "${configs[@]}"; do
        label=${c%%:*}
        flags=${c#*:}
        $B bench "${M[@]}" --interference ${flags//,/ } 2>>"$OUT/interference_err.txt" |
          python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['label']='$label'; print(json.dumps(r))" |
          tee -a "$OUT/interference.jsonl"
      done
      tail -3 "$OUT/interference_err.txt"
      ;;
    sweep)
      deps_path
      M=(--model qwen3-0.6b --load-format dummy --device cuda --gpu-memory-utilization 0.5 --max-model-len 2048)
      run_sweep() {  # label, serve flags...
        local label=$1
        shift
        $B serve "${M[@]}" "$@" --port 18000 >"$OUT/serve_$label.txt" 2>&1 &
        local srv=$!
        wait_health 18000 || { echo "server did not start"; tail -5 "$OUT/serve_$label.txt"; return; }
        for rate in ${RATES:-20 50 100 inf}; do
          $B bench-serve --base-url http://127.0.0.1:18000 --num-prompts "${NUM_PROMPTS:-500}" --request-rate "$rate" \
            --random-input-len 512 --random-output-len 128 --result-json /tmp/r.json > /dev/null &&
            python3 -c "import json,sys; r=json.load(open('/tmp/r.json')); r['label']='$label'; r['rate']='$rate'; print(json.dumps(r))" |
            tee -a "$OUT/sweep.jsonl"
        done
        kill "$srv"
        wait "$srv"
      }
      IFS=';' read -ra configs <<< "${SWEEP_CONFIGS:-chunked_16384:--max-num-batched-tokens,16384;chunked_2048:--max-num-batched-tokens,2048;prefill_first:--no-enable-chunked-prefill}"
      for c in "${configs[@]}"; do
        flags=${c#*:}
        run_sweep "${c%%:*}" ${flags//,/ }
      done
      ;;
    throughput)
      deps_path
      M=(--model qwen3-0.6b --load-format dummy --device cuda)
      $B bench "${M[@]}" | tee -a "$OUT/throughput.jsonl"
      $B bench "${M[@]}" --no-enable-chunked-prefill | tee -a "$OUT/throughput.jsonl"
      ;;
    prefix)
      deps_path
      M=(--model qwen3-0.6b --load-format dummy --device cuda --shared-prefix-len "${SHARED_PREFIX:-100}")
      $B bench "${M[@]}" | tee -a "$OUT/prefix.jsonl"
      $B bench "${M[@]}" --no-enable-prefix-caching | tee -a "$OUT/prefix.jsonl"
      ;;
    interference_http)
      deps_path
      IFS=';' read -ra configs <<< "${HTTP_CONFIGS:-serve_default:}"
      for c in "${configs[@]}"; do
        label=${c%%:*}
        flags=${c#*:}
        $B serve --model "${IMODEL:-qwen3-8b}" --load-format dummy --device cuda --max-model-len 40000 --port 18002 --shutdown-timeout 2 \
          ${flags//,/ } >"$OUT/serve_http_$label.txt" 2>&1 &
        srv=$!
        wait_health 18002 || { echo "server did not start"; tail -5 "$OUT/serve_http_$label.txt"; continue; }
        python3 scripts/interference_http.py --base http://127.0.0.1:18002 --model "${IMODEL:-qwen3-8b}" \
          --streams "${ISTREAMS:-64}" --context "${ICONTEXT:-1024}" --prompt-len "${IPROMPT:-32000}" |
          python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['label']='$label'; print(json.dumps(r))" |
          tee -a "$OUT/interference_http.jsonl"
        kill "$srv"
        wait "$srv"
      done
      ;;
    soak)
      deps_path
      $B serve --model qwen3-0.6b --load-format dummy --device cuda --max-model-len 16384 --port 18001 \
        >"$OUT/serve_soak.txt" 2>&1 &
      srv=$!
      wait_health 18001 || { echo "server did not start"; tail -5 "$OUT/serve_soak.txt"; exit 5; }
      python3 scripts/soak_server.py --base http://127.0.0.1:18001 --pid "$srv" --minutes "${SOAK_MINUTES:-30}" \
        --rate "${SOAK_RATE:-8}" | tee -a "$OUT/soak.jsonl"
      kill "$srv"
      wait "$srv"
      tail -3 "$OUT/serve_soak.txt"
      ;;
    *) echo "gpu_serving: unknown mode $mode"; exit 2 ;;
  esac
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
