// One rank's membership in a tensor-parallel group: the TCP control channel to the other ranks
// (a star through rank 0, set up by dist/rendezvous.h), a watchdog for dead peers, and the
// factory of the rank's Communicator (CPU: TCP sockets of their own; CUDA: NCCL, bootstrapped
// with the ncclUniqueId that rank 0 makes and sends over the control channel).
//
// Control messages are byte strings; every rank makes the same sequence of calls, so the
// messages pair up: rank 0's broadcast() with each worker's receive(), all_min() on every rank.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nanovllm/backends/communicator.h"
#include "nanovllm/dist/rendezvous.h"

namespace nanovllm {

class TpGroup {
 public:
  // Connects to the other ranks (blocks until all are there or opts.timeout_s passes).
  // cpu_collectives: also open the sockets of a CpuCommunicator.
  TpGroup(const RendezvousOptions& opts, bool cpu_collectives);
  ~TpGroup();

  int rank() const { return rank_; }
  int world() const { return world_; }

  // rank 0: sends bytes (not empty) to every worker. Workers: receive() returns them (waits as
  // long as rank 0 lives; throws Error when it has gone away).
  void broadcast(const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> receive();
  // Workers: receive() polls without sleeping for up to `seconds` before it blocks (see Socket).
  void set_receive_spin(double seconds);
  // rank 0: stops its watchdog and sends the empty message, which workers' receive() returns
  // after stopping theirs (so that the orderly exit that follows raises no alarm).
  void goodbye();
  // Every rank passes its value and gets the minimum over all ranks (e.g. KV-cache blocks).
  int64_t all_min(int64_t v);

  // The rank's collectives: CpuCommunicator on the CPU, NCCL on CUDA. Call once, on every rank,
  // at the same point of start-up (the NCCL unique id travels over the control channel).
  std::unique_ptr<Communicator> make_communicator(Backend& be);

  // Watches the control sockets every ~200 ms while the main thread is not reading them; a
  // closed peer calls on_lost("tensor-parallel rank R exited (connection closed)") on the
  // watchdog thread. Needed where the main thread may sit in a collective that cannot see a dead
  // peer (NCCL). on_lost must end the process (the CLI prints the line and exits).
  void start_watchdog(std::function<void(const std::string&)> on_lost);
  // Stops watching (before an orderly shutdown, when peers are expected to leave).
  void stop_watchdog();

 private:
  void watch();

  int rank_, world_;
  std::vector<Socket> control_;  // rank 0: per rank (index 0 unused); worker: [0] = rank 0
  std::vector<Socket> data_;     // same layout, CPU collectives only
  std::mutex io_mu_;             // held by the main thread while it uses control_
  std::atomic<bool> stop_{false};
  std::function<void(const std::string&)> on_lost_;
  std::thread watchdog_;
};

}  // namespace nanovllm
