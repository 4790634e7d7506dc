// One client connection of the HTTP server (Boost.Beast over Boost.Asio), used from the C++20
// coroutine that serves it, on the connection's strand. Route handlers answer through it: a whole
// response, or a chunked stream (server-sent events). While a request is being generated it can
// tell whether the client has gone away without reading from the socket, so pipelined requests
// stay queued for the next read.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

namespace nanovllm::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Request line + headers; more gets 431.
inline constexpr uint32_t kMaxHeaderBytes = 64 << 10;

// The limits every request is read with (also by the fuzz target of the parser): the headers,
// and the body whatever its transfer encoding (past it: 413).
inline void apply_request_limits(http::request_parser<http::string_body>& parser, int64_t max_body_bytes) {
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(uint64_t(max_body_bytes));
}

class Connection {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  Connection(net::ip::tcp::socket socket, std::chrono::seconds write_timeout);
  ~Connection();

  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buffer_; }  // bytes read past the current request

  // Before each response: the request's HTTP version (10 or 11) and whether the connection
  // stays open after it (else the response says "Connection: close" and the session ends).
  void begin_response(int http_version, bool keep_alive) {
    http_version_ = http_version;
    keep_alive_ = keep_alive;
    response_started_ = chunked_ = false;
    common_headers_.clear();
  }
  // Headers the response to the current request carries whatever it turns out to be (CORS).
  void add_common_header(std::string name, std::string value) {
    common_headers_.emplace_back(std::move(name), std::move(value));
  }
  bool keep_alive() const { return keep_alive_; }

  // A whole response (Content-Length framing). Returns false when the client is gone.
  // A whole JSON response (Content-Type: application/json).
  net::awaitable<bool> send_json(http::status status, std::string json_text, const Headers& extra = {});
  net::awaitable<bool> send(http::status status, std::string_view content_type, std::string body,
                            const Headers& extra = {});
  // A streamed response: the headers, then chunks, then the end. Over HTTP/1.0 the body is sent
  // raw and the connection closes after it.
  net::awaitable<bool> start_stream(std::string_view content_type, const Headers& extra = {});
  net::awaitable<bool> write_chunk(std::string_view data);
  net::awaitable<bool> end_stream();

  bool response_started() const { return response_started_; }
  // The client closed or reset the connection (a peek at the socket, which consumes nothing).
  bool peer_closed();
  bool open() const { return open_; }
  void close();
  // Closes after an error response while the client may still be sending (a body past the
  // limit): stops sending, then reads and discards for up to `linger` before closing, so the
  // client's unread upload does not turn the close into a reset that loses the response.
  net::awaitable<void> close_after_error(std::chrono::milliseconds linger);

 private:
  net::awaitable<bool> write(std::vector<net::const_buffer> bufs);
  std::string head(http::status status, std::string_view content_type, const Headers& extra) const;

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::chrono::seconds write_timeout_;
  bool open_ = true;
  int http_version_ = 11;
  bool keep_alive_ = true;
  bool response_started_ = false;
  bool chunked_ = false;
  Headers common_headers_;
};

}  // namespace nanovllm::server
