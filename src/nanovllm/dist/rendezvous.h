// Start-up handshake of a tensor-parallel group over TCP: rank 0 listens on
// master_addr:master_port, every other rank connects (retrying until the timeout, since rank 0
// may start later) once per channel and says hello {world, rank, channel}. Rank 0 checks that
// the sizes agree and that no rank appears twice. The result is a star: rank 0 holds one socket
// per (channel, worker), a worker one per channel to rank 0.
#pragma once
#include <string>
#include <vector>

#include "nanovllm/dist/socket.h"

namespace nanovllm {

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int rank = 0, world = 1;
  int channels = 1;        // independent connections per worker (control, CPU collectives, ...)
  double timeout_s = 120;  // for every rank to show up
};

// rank 0: [channel][rank] (index 0 unused); worker: [channel][0] = its socket to rank 0.
std::vector<std::vector<Socket>> rendezvous(const RendezvousOptions& o);

}  // namespace nanovllm
