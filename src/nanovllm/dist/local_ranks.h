// The automatic start of a node's tensor-parallel ranks, shared by the CLI (re-executing itself)
// and the Python package (running the nanovllm executable): this process is the node's first
// rank (cfg.tp_rank); each other rank R of the node is `command` + --tp-spawned-rank R
// --tp-spawned-port P, P being rank 0's port (picked here when unset, single node only).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/dist/launcher.h"

namespace nanovllm {

// Starts the ranks and monitors them (cfg.on_tp_peer_lost); `command` empty: this process's own
// command line. Throws UserError when several nodes have no --master-port.
std::unique_ptr<LocalLauncher> start_local_ranks(EngineConfig& cfg, std::vector<std::string> command = {});

}  // namespace nanovllm
