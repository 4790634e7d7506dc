// The CLI side of tensor parallelism: decides what this process is and starts the node's other
// ranks. Without --rank, a process with --tensor-parallel-size N starts ranks
// node_rank * N/nnodes + 1 .. (node_rank + 1) * N/nnodes - 1 of its node by re-executing itself
// (dist/launcher.h) and becomes the first of them (rank 0 on node 0); with --rank R it is rank R
// alone (manual start, any host). Checks (head divisibility, GPUs per node) run before anything
// starts, so bad sizes fail with one line and exit code 2.
#pragma once
#include <memory>

#include "engine_flags.h"
#include "nanovllm/dist/launcher.h"

namespace nanovllm::cli {

struct TpStart {
  std::unique_ptr<LocalLauncher> launcher;  // this node's other ranks (auto start); waits for them
  bool worker = false;                      // this process is a worker: call run_worker()
};

// Adjusts cfg (master port, peer-loss handler) and starts the node's other ranks if needed.
TpStart start_tensor_parallel(EngineConfig& cfg, const EngineFlags& flags);

// Runs this worker rank until rank 0 says goodbye. Rank 0 gone: prints one line and exits with
// kExitRankZeroGone; other errors propagate (the CLI's usual exit codes).
void run_worker(const EngineConfig& cfg, bool spawned);

}  // namespace nanovllm::cli
