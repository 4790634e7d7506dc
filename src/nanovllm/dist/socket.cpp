#include "nanovllm/dist/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "nanovllm/utils/error.h"

namespace nanovllm {

using Clock = std::chrono::steady_clock;

static std::string errno_str() { return std::strerror(errno); }

// addr (numeric or host name) and port -> IPv4 address.
static sockaddr_in resolve(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || !res)
    throw UserError("--master-addr '" + addr + "': cannot resolve the host name");
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

// No Nagle (small control messages go out at once); keepalive probes so that a dead host is
// noticed in about 20 s even when no data flows.
static void tune(int fd) {
  int one = 1, idle = 10, intvl = 3, cnt = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

Socket::Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(std::move(o.peer_)), spin_s_(o.spin_s_) { o.fd_ = -1; }
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    peer_ = std::move(o.peer_);
    spin_s_ = o.spin_s_;
    o.fd_ = -1;
  }
  return *this;
}
Socket::~Socket() { close(); }
void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const std::string& addr, int port) {
  sockaddr_in sa = resolve(addr, port);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("socket(): " + errno_str());
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 64) != 0) {
    std::string e = errno_str();
    ::close(fd);
    throw UserError("tensor parallel: cannot listen on " + addr + ":" + std::to_string(port) + ": " + e +
                    " (choose another --master-port)");
  }
  return Socket(fd, "listener " + addr + ":" + std::to_string(port));
}

Socket Socket::connect(const std::string& addr, int port, double timeout_s, const std::string& peer) {
  sockaddr_in sa = resolve(addr, port);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last;
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error("socket(): " + errno_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      tune(fd);
      return Socket(fd, peer);
    }
    last = errno_str();
    ::close(fd);
    if (Clock::now() >= deadline)
      throw Error("tensor parallel: cannot reach " + peer + " at " + addr + ":" + std::to_string(port) + " within " +
                  std::to_string(int(timeout_s)) + " s (" + last + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Waits until fd is readable; false on timeout. timeout_s < 0: no timeout. For the first spin_s
// seconds it polls without sleeping (a sleeping thread wakes tens of us after the data arrives).
static bool wait_readable(int fd, double timeout_s, double spin_s = 0) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  const auto spin_end = start + std::chrono::duration<double>(timeout_s >= 0 ? std::min(spin_s, timeout_s) : spin_s);
  while (Clock::now() < spin_end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) return true;
  }
  while (true) {
    int ms = -1;
    if (timeout_s >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return false;
      ms = int(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0) return true;  // readable, or hung up / error: the read reports which
    if (r == 0) return false;
    if (errno != EINTR) throw Error("poll(): " + errno_str());
  }
}

Socket Socket::accept(double timeout_s, const std::string& what) {
  if (!wait_readable(fd_, timeout_s))
    throw Error("tensor parallel: " + what + " did not connect within " + std::to_string(int(timeout_s)) + " s");
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) throw Error("accept(): " + errno_str());
  tune(fd);
  return Socket(fd, what);
}

int Socket::local_port() const {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) throw Error("getsockname(): " + errno_str());
  return ntohs(sa.sin_port);
}

void Socket::send_all(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw PeerLostError(peer_ + " exited (" + errno_str() + ")");
    p += w;
    n -= size_t(w);
  }
}

void Socket::recv_all(void* data, size_t n, double timeout_s) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_readable(fd_, timeout_s, spin_s_))
      throw Error("tensor parallel: no answer from " + peer_ + " within " + std::to_string(int(timeout_s)) +
                  " s (hung?)");
    ssize_t r = ::recv(fd_, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw PeerLostError(peer_ + " exited (connection closed)");
    if (r < 0) throw PeerLostError(peer_ + " exited (" + errno_str() + ")");
    p += r;
    n -= size_t(r);
  }
}

void Socket::send_msg(const std::vector<uint8_t>& bytes) {
  uint64_t n = bytes.size();
  send_all(&n, sizeof n);
  if (n) send_all(bytes.data(), bytes.size());
}

std::vector<uint8_t> Socket::recv_msg(double timeout_s) {
  uint64_t n = 0;
  recv_all(&n, sizeof n, timeout_s);
  if (n > (uint64_t(1) << 36)) throw Error("tensor parallel: corrupt message from " + peer_);
  std::vector<uint8_t> out(static_cast<size_t>(n));
  if (n) recv_all(out.data(), out.size(), timeout_s);
  return out;
}

bool Socket::peer_closed() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP)) return true;
  char c;
  ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int pick_free_port(const std::string& addr) {
  Socket s = Socket::listen(addr, 0);
  return s.local_port();
}

}  // namespace nanovllm
