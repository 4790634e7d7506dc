#include "nanovllm/frontend/tensor_parallel_start.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "nanovllm/dist/socket.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// Starts the node's other ranks and watches them (cfg.on_tp_peer_lost); `command` empty: this
// process's own command line.
std::unique_ptr<LocalLauncher> start_local_ranks(EngineConfig& cfg, std::vector<std::string> command) {
  if (cfg.master_port == 0) {
    if (cfg.nnodes > 1)
      throw UserError("--nnodes " + std::to_string(cfg.nnodes) + " needs --master-port and --master-addr");
    cfg.master_port = pick_free_port(cfg.master_addr);
  }
  const int first = cfg.node_rank * cfg.ranks_per_node();
  std::vector<int> others;
  for (int r = first + 1; r < first + cfg.ranks_per_node(); ++r) others.push_back(r);
  const int port = cfg.master_port;
  auto launcher = std::make_unique<LocalLauncher>(
      others,
      [port](int r) {
        return std::vector<std::string>{"--tp-spawned-rank", std::to_string(r), "--tp-spawned-port",
                                        std::to_string(port)};
      },
      std::move(command));
  launcher->start_monitor(cfg.on_tp_peer_lost);
  return launcher;
}

}  // namespace

TpStart start_tensor_parallel(EngineConfig& cfg, bool start_others, std::vector<std::string> worker_command) {
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
    cfg.on_tp_peer_lost = [](const std::string& what) {  // rank 0: nothing to go on with
      std::fprintf(stderr, "error: %s\n", what.c_str());
      std::fflush(stderr);
      _exit(1);
    };
  }
  if (start_others) st.launcher = start_local_ranks(cfg, std::move(worker_command));
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

}  // namespace nanovllm
