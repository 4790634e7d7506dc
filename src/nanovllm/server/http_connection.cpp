#include "nanovllm/server/http_connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace nanovllm::server {

// Note on the coroutines below: GCC 12 miscompiles ("array used as initializer") a co_await
// expression that holds an array temporary (a string literal, an initializer list), so buffers
// are gathered into a named vector before each co_await.

namespace {
constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kJsonType = "application/json";

std::string to_hex(size_t n) {
  char buf[24];
  const int len = std::snprintf(buf, sizeof buf, "%zx", n);
  return std::string(buf, size_t(len));
}
}  // namespace

Connection::Connection(net::ip::tcp::socket socket, std::chrono::seconds write_timeout)
    : stream_(std::move(socket)), buffer_(1 << 20), write_timeout_(write_timeout) {}

Connection::~Connection() { close(); }

void Connection::close() {
  if (!stream_.socket().is_open()) return;
  boost::system::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
  open_ = false;
}

net::awaitable<void> Connection::close_after_error(std::chrono::milliseconds linger) {
  if (stream_.socket().is_open()) {
    boost::system::error_code ec;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
    stream_.expires_after(linger);
    std::vector<char> sink(64 << 10);
    for (size_t total = 0; !ec && total < (64u << 20);) {
      size_t n = 0;
      std::tie(ec, n) = co_await stream_.async_read_some(net::buffer(sink), net::as_tuple(net::use_awaitable));
      total += n;
    }
  }
  close();
}

bool Connection::peer_closed() {
  if (!open_) return true;
  char c;
  const ssize_t n = ::recv(stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return false;
  open_ = false;  // 0: an orderly close; < 0: reset or another error
  return true;
}

std::string Connection::head(http::status status, std::string_view content_type, const Headers& extra) const {
  std::string h = http_version_ >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  h += std::to_string(unsigned(status));
  h += ' ';
  h += std::string_view(http::obsolete_reason(status));
  h += "\r\n";
  if (!content_type.empty()) {
    h += "Content-Type: ";
    h += content_type;
    h += "\r\n";
  }
  for (auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  for (auto& [k, v] : common_headers_) h += k + ": " + v + "\r\n";
  if (!keep_alive_)
    h += "Connection: close\r\n";
  else if (http_version_ < 11)
    h += "Connection: keep-alive\r\n";
  return h;
}

net::awaitable<bool> Connection::write(std::vector<net::const_buffer> bufs) {
  if (!open_) co_return false;
  stream_.expires_after(write_timeout_);
  auto [ec, n] = co_await net::async_write(stream_, bufs, net::as_tuple(net::use_awaitable));
  (void)n;
  if (ec) open_ = false;
  co_return !ec;
}

net::awaitable<bool> Connection::send(http::status status, std::string_view content_type, std::string body,
                                      const Headers& extra) {
  response_started_ = true;
  std::string h = head(status, content_type, extra);
  h += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  std::vector<net::const_buffer> bufs{net::buffer(h), net::buffer(body)};
  co_return co_await write(std::move(bufs));
}

net::awaitable<bool> Connection::send_json(http::status status, std::string json_text, const Headers& extra) {
  co_return co_await send(status, kJsonType, std::move(json_text), extra);
}

net::awaitable<bool> Connection::start_stream(std::string_view content_type, const Headers& extra) {
  response_started_ = true;
  chunked_ = http_version_ >= 11;
  if (!chunked_) keep_alive_ = false;  // an HTTP/1.0 body ends when the connection does
  std::string h = head(http::status::ok, content_type, extra);
  if (chunked_) h += "Transfer-Encoding: chunked\r\n";
  h += "\r\n";
  std::vector<net::const_buffer> bufs{net::buffer(h)};
  co_return co_await write(std::move(bufs));
}

net::awaitable<bool> Connection::write_chunk(std::string_view data) {
  if (data.empty()) co_return open_;  // an empty chunk would end the body
  std::vector<net::const_buffer> bufs;
  std::string size;
  if (chunked_) {
    size = to_hex(data.size()) + "\r\n";
    bufs.push_back(net::buffer(size));
  }
  bufs.push_back(net::buffer(data));
  if (chunked_) bufs.push_back(net::buffer(kCrlf));
  co_return co_await write(std::move(bufs));
}

net::awaitable<bool> Connection::end_stream() {
  bool ok = true;
  if (chunked_) {
    std::vector<net::const_buffer> bufs{net::buffer(kLastChunk)};
    ok = co_await write(std::move(bufs));
  }
  co_return ok;
}

}  // namespace nanovllm::server
