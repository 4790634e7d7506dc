// Tensor-parallel start-up of a front end, in one place for the CLI and the Python package: what
// this process is, the node's other ranks started and watched, a lost peer handled.
//
// Without a manual start, a process with tensor_parallel_size N is the first rank of its node
// (node_rank * N/nnodes) and starts the node's other ranks, node_rank * N/nnodes + 1 ..
// (node_rank + 1) * N/nnodes - 1, as `worker_command` + --tp-spawned-rank R --tp-spawned-port P
// (dist/launcher.h; P: rank 0's port, picked here when unset, single node only). The CLI
// re-executes itself (worker_command empty), the Python package runs its nanovllm executable as
// `generate` workers. With --rank R (manual start, any host) or as a started worker, it is rank R
// alone. Checks (head divisibility, GPUs per node) run before anything starts, so bad sizes fail
// with one line.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/dist/launcher.h"

namespace nanovllm {

struct TpStart {
  std::unique_ptr<LocalLauncher> launcher;  // this node's other ranks (automatic start); waits for them
  bool worker = false;                      // this process is a worker: call run_worker()
};

// Adjusts cfg (master port, the peer-loss handler: one line on stderr, then the process ends) and,
// when `start_others`, starts the node's other ranks. Nothing for tensor_parallel_size 1.
// Throws UserError.
TpStart start_tensor_parallel(EngineConfig& cfg, bool start_others, std::vector<std::string> worker_command = {});

// Runs this worker rank until rank 0 says goodbye. Rank 0 gone: prints one line and exits with
// kExitRankZeroGone; other errors propagate (the CLI's usual exit codes).
void run_worker(const EngineConfig& cfg, bool spawned);

}  // namespace nanovllm
