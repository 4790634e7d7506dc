#include "nanovllm/dist/tp_group.h"

#include <chrono>

#include "nanovllm/dist/cpu_communicator.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

TpGroup::TpGroup(const RendezvousOptions& opts, bool cpu_collectives) : rank_(opts.rank), world_(opts.world) {
  RendezvousOptions o = opts;
  o.channels = cpu_collectives ? 2 : 1;
  auto conns = rendezvous(o);
  control_ = std::move(conns[0]);
  if (cpu_collectives) data_ = std::move(conns[1]);
}

TpGroup::~TpGroup() { stop_watchdog(); }

void TpGroup::broadcast(const std::vector<uint8_t>& bytes) {
  if (rank_ != 0) throw Error("TpGroup::broadcast: only rank 0 sends");
  if (bytes.empty()) throw Error("TpGroup::broadcast: the empty message is reserved for goodbye()");
  std::lock_guard lk(io_mu_);
  for (int r = 1; r < world_; ++r) control_[size_t(r)].send_msg(bytes);
}

void TpGroup::set_receive_spin(double seconds) {
  if (rank_ == 0) throw Error("TpGroup::set_receive_spin: rank 0 does not receive broadcasts");
  std::lock_guard lk(io_mu_);
  control_[0].set_spin(seconds);
}

void TpGroup::goodbye() {
  if (rank_ != 0) return;
  stop_watchdog();
  std::lock_guard lk(io_mu_);
  for (int r = 1; r < world_; ++r) control_[size_t(r)].send_msg({});
}

std::vector<uint8_t> TpGroup::receive() {
  if (rank_ == 0) throw Error("TpGroup::receive: rank 0 does not receive broadcasts");
  std::lock_guard lk(io_mu_);
  auto msg = control_[0].recv_msg(-1);
  if (msg.empty()) stop_ = true;  // goodbye: rank 0 leaves next, which is no failure
  return msg;
}

int64_t TpGroup::all_min(int64_t v) {
  std::lock_guard lk(io_mu_);
  const double timeout_s = 600;  // the other ranks may still be loading weights or warming up
  if (rank_ != 0) {
    control_[0].send_all(&v, sizeof v);
    control_[0].recv_all(&v, sizeof v, timeout_s);
    return v;
  }
  for (int r = 1; r < world_; ++r) {
    int64_t x = 0;
    control_[size_t(r)].recv_all(&x, sizeof x, timeout_s);
    v = std::min(v, x);
  }
  for (int r = 1; r < world_; ++r) control_[size_t(r)].send_all(&v, sizeof v);
  return v;
}

std::unique_ptr<Communicator> TpGroup::make_communicator(Backend& be) {
  if (be.device() == Device::CPU) {
    if (data_.empty()) throw Error("TpGroup: the CPU communicator's sockets were not opened");
    return std::make_unique<CpuCommunicator>(rank_, world_, std::move(data_));
  }
  std::vector<uint8_t> id;
  if (rank_ == 0) {
    id = make_nccl_unique_id();
    broadcast(id);
  } else {
    id = receive();
  }
  return make_nccl_communicator(be, rank_, world_, id);
}

void TpGroup::start_watchdog(std::function<void(const std::string&)> on_lost) {
  if (watchdog_.joinable() || !on_lost) return;
  on_lost_ = std::move(on_lost);
  stop_ = false;
  watchdog_ = std::thread([this] { watch(); });
}

void TpGroup::stop_watchdog() {
  {
    std::lock_guard lk(io_mu_);  // not while a check is running: after this, none starts
    stop_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
}

void TpGroup::watch() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string lost;
    {
      std::unique_lock lk(io_mu_, std::try_to_lock);
      if (!lk.owns_lock()) continue;  // the main thread is talking to the peers: it sees a death itself
      if (stop_) return;
      for (auto& s : control_)
        if (s.valid() && s.peer_closed()) {
          lost = s.peer() + " exited (connection closed)";
          break;
        }
    }
    if (!lost.empty()) {
      on_lost_(lost);
      return;
    }
  }
}

}  // namespace nanovllm
