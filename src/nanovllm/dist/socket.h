// Blocking TCP sockets with bounded waits, for the tensor-parallel control channel and the CPU
// communicator. Every receive waits with poll(): a peer that closed its end (or a dead host,
// through TCP keepalive) gives an Error naming the peer, never a hang; a receive with a timeout
// gives an Error when nothing came in time. Messages are length-prefixed (u64 little-endian).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/utils/error.h"

namespace nanovllm {

// The other end of a connection has gone away (exited, crashed, or its host died).
struct PeerLostError : Error {
  using Error::Error;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // A listening socket on addr:port (port 0: any free one; see local_port()).
  static Socket listen(const std::string& addr, int port);
  // Connects to addr:port, retrying until timeout_s (the listener may not be up yet).
  static Socket connect(const std::string& addr, int port, double timeout_s, const std::string& peer);
  // Waits up to timeout_s for a connection on a listening socket.
  Socket accept(double timeout_s, const std::string& what);
  int local_port() const;

  // Exact-size transfers. timeout_s < 0: wait as long as the peer is alive.
  void send_all(const void* data, size_t n);
  void recv_all(void* data, size_t n, double timeout_s);
  void send_msg(const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> recv_msg(double timeout_s);
  // True when the peer has closed its end (checked without consuming data or blocking).
  bool peer_closed() const;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }
  void set_peer(std::string p) { peer_ = std::move(p); }
  // Receives poll without sleeping for up to `seconds` before they block (latency-critical
  // channels: a tensor-parallel worker waiting for its next step).
  void set_spin(double seconds) { spin_s_ = seconds; }
  void close();

 private:
  int fd_ = -1;
  std::string peer_;  // names the other end in errors, e.g. "tensor-parallel rank 1"
  double spin_s_ = 0;
};

// A port that is free on addr right now (for the automatic single-host start).
int pick_free_port(const std::string& addr);

}  // namespace nanovllm
