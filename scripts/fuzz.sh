#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang + ASan + UBSan) in build-fuzz/ and runs each for
# FUZZ_SECONDS (default 60) from its seeds; fails on any crash, leak, timeout (10 s per input) or
# out-of-memory (4 GiB). CI runs it with the default; a longer local run:
#   FUZZ_SECONDS=600 scripts/fuzz.sh                 # every target, 10 minutes each
#   FUZZ_SECONDS=600 scripts/fuzz.sh http_request    # one target
# What each run found stays in build-fuzz/fuzz-corpus/<target> (grown corpus) and, for a crash,
# build-fuzz/fuzz-artifacts/<target>-crash-*: rerun one with build-fuzz/tests/fuzz_<target> FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http_request tokenizer template safetensors config structured)

# Seeds: the committed corpora plus the inputs the tests already use.
seeds() {
  case "$1" in
    http_request) echo tests/fuzz/corpus/http_request ;;
    tokenizer) echo tests/fixtures/tokenizer_corpus ;;
    template) echo tests/fixtures/chat ;;
    safetensors) echo tests/fuzz/corpus/safetensors ;;
    config) echo tests/fuzz/corpus/config ;;
    structured) echo tests/fuzz/corpus/structured ;;
    *) echo "fuzz.sh: unknown target '$1'" >&2; exit 2 ;;
  esac
}
max_len() { case "$1" in safetensors) echo 65536 ;; http_request) echo 16384 ;; *) echo 4096 ;; esac; }

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DNANOVLLM_FUZZ=ON -DNANOVLLM_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

summary=()
for t in "${targets[@]}"; do
  corpus="$BUILD_DIR/fuzz-corpus/$t"; art="$BUILD_DIR/fuzz-artifacts"
  mkdir -p "$corpus" "$art"
  log="$BUILD_DIR/fuzz-$t.log"
  echo "fuzz: $t for ${SECONDS_EACH} s"
  if ! NANOVLLM_SOURCE_DIR=$PWD ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
       UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
       "$BUILD_DIR/tests/fuzz_$t" "$corpus" $(seeds "$t") -max_total_time="$SECONDS_EACH" -timeout=10 \
       -rss_limit_mb=4096 -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$art/$t-" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED (log: $log; inputs: $art/$t-*)"
    exit 1
  fi
  execs=$(grep -oE 'stat::number_of_executed_units:[[:space:]]*[0-9]+' "$log" | awk '{print $2}')
  rate=$(grep -oE 'stat::average_exec_per_sec:[[:space:]]*[0-9]+' "$log" | awk '{print $2}')
  summary+=("$(printf '%-14s %8s s %12s runs %8s exec/s  0 crashes  corpus %s' "$t" "$SECONDS_EACH" "$execs" "$rate" "$(ls "$corpus" | wc -l)")")
done
printf 'fuzz: %s\n' "${summary[@]}"
