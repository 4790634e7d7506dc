#include "tensor_parallel_start.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/dist/local_ranks.h"
#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cli {

TpStart start_tensor_parallel(EngineConfig& cfg, const EngineFlags& flags) {
  TpStart st;
  if (cfg.tensor_parallel_size == 1) return st;
  check_tensor_parallel(cfg, resolve_model_config(cfg));  // before any process or GPU work
  st.worker = cfg.tp_rank != 0;
  const int rank = cfg.tp_rank;
  if (st.worker) {
    cfg.on_tp_peer_lost = [rank](const std::string& what) {
      std::fprintf(stderr, "error: tensor-parallel rank %d: %s\n", rank, what.c_str());
      std::fflush(stderr);
      _exit(kExitRankZeroGone);
    };
  } else {
    cfg.on_tp_peer_lost = [](const std::string& what) {
      std::fprintf(stderr, "error: %s\n", what.c_str());
      std::fflush(stderr);
      _exit(1);
    };
  }
  if (flags.rank >= 0 || flags.spawned()) return st;  // manual start, or started by a launcher
  st.launcher = start_local_ranks(cfg);
  return st;
}

void run_worker(const EngineConfig& cfg, bool spawned) {
  // A started worker ignores Ctrl-C aimed at the terminal's process group: it leaves when rank 0
  // says goodbye or dies (PR_SET_PDEATHSIG), so an interrupted `serve` shuts down in order.
  if (spawned) std::signal(SIGINT, SIG_IGN);
  try {
    run_tp_worker(cfg);
  } catch (const PeerLostError& e) {
    std::fprintf(stderr, "error: tensor-parallel rank %d: %s\n", cfg.tp_rank, e.what());
    std::fflush(stderr);
    std::exit(kExitRankZeroGone);
  }
}

}  // namespace nanovllm::cli
