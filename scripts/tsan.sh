#!/usr/bin/env bash
# ThreadSanitizer pass over the multithreaded parts: builds build-tsan/ (g++, -fsanitize=thread,
# no CUDA) and runs the tensor-parallel unit tests (control channel, CPU communicator, TP engines:
# threads and sockets) and the end-to-end tests of `serve` (engine thread + I/O threads) and of the
# tensor-parallel launcher (rank processes). Any report fails the run (halt_on_error).
# The CPU backend runs one thread here (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = 1): libgomp and
# OpenBLAS are not instrumented, and their barriers would read as races. The disconnect test is
# left out: it needs streams to reach a given chunk inside a 2 s request timeout, which the ~10x
# slower instrumented engine misses; the fuzz run's abandoned requests take the same cancel path.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-tsan}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNANOVLLM_SANITIZE_THREAD=ON -DNANOVLLM_CUDA=OFF >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target nanovllm_cli unit_dist
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export TSAN_OPTIONS="halt_on_error=1 abort_on_error=0 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" \
  -R '^(ControlChannel|CpuCommunicator|Rendezvous|TensorParallelEngine|ShardedWeights)\.|e2e_test_server_(openai|errors|load|http_framing|token_ids_only|fuzz_live|bench_serve)|e2e_test_cli_tensor_parallel'
