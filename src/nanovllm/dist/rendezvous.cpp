#include "nanovllm/dist/rendezvous.h"

#include <chrono>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

constexpr uint32_t kMagic = 0x4e565450;  // "NVTP"

struct Hello {
  uint32_t magic;
  int32_t world, rank, channel;
};

std::string rank_name(int r) { return "tensor-parallel rank " + std::to_string(r); }

std::vector<std::vector<Socket>> serve(const RendezvousOptions& o) {
  Socket listener = Socket::listen(o.master_addr, o.master_port);
  std::vector<std::vector<Socket>> conns(size_t(o.channels));
  for (auto& c : conns) c.resize(size_t(o.world));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.timeout_s);
  for (int got = 0; got < (o.world - 1) * o.channels; ++got) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    Socket s = listener.accept(std::max(0.0, left), "the other tensor-parallel ranks (" +
                                                        std::to_string((o.world - 1) * o.channels - got) +
                                                        " connections missing)");
    Hello h{};
    s.recv_all(&h, sizeof h, 10);
    if (h.magic != kMagic) throw Error("tensor parallel: a stranger connected to the master port");
    if (h.world != o.world)
      throw UserError("tensor parallel: rank " + std::to_string(h.rank) + " was started with --tensor-parallel-size " +
                      std::to_string(h.world) + " but rank 0 with " + std::to_string(o.world));
    if (h.rank <= 0 || h.rank >= o.world || h.channel < 0 || h.channel >= o.channels)
      throw UserError("tensor parallel: a process claims rank " + std::to_string(h.rank) + " of " +
                      std::to_string(o.world));
    auto& slot = conns[size_t(h.channel)][size_t(h.rank)];
    if (slot.valid()) throw UserError("tensor parallel: two processes were started as rank " + std::to_string(h.rank));
    const uint32_t ok = kMagic;
    s.send_all(&ok, sizeof ok);
    s.set_peer(rank_name(h.rank));
    slot = std::move(s);
  }
  return conns;
}

std::vector<std::vector<Socket>> join(const RendezvousOptions& o) {
  std::vector<std::vector<Socket>> conns(size_t(o.channels));
  for (int c = 0; c < o.channels; ++c) {
    Socket s = Socket::connect(o.master_addr, o.master_port, o.timeout_s, rank_name(0));
    Hello h{kMagic, o.world, o.rank, c};
    s.send_all(&h, sizeof h);
    uint32_t ok = 0;
    s.recv_all(&ok, sizeof ok, o.timeout_s);
    if (ok != kMagic) throw Error("tensor parallel: unexpected answer from rank 0");
    conns[size_t(c)].push_back(std::move(s));
  }
  return conns;
}

}  // namespace

std::vector<std::vector<Socket>> rendezvous(const RendezvousOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw UserError("tensor parallel: rank " + std::to_string(o.rank) + " is outside [0, " + std::to_string(o.world) +
                    ")");
  if (o.world > 1 && o.master_port <= 0) throw UserError("tensor parallel: --master-port is required");
  return o.rank == 0 ? serve(o) : join(o);
}

}  // namespace nanovllm
