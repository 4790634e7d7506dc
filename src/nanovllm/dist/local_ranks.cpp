#include "nanovllm/dist/local_ranks.h"

#include "nanovllm/dist/socket.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

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

}  // namespace nanovllm
