#include "nanovllm/server/http_server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "nanovllm/server/cors.h"
#include "nanovllm/server/generation_handler.h"
#include "nanovllm/server/http_connection.h"
#include "nanovllm/server/request_caps.h"
#include "nanovllm/server/responses_handler.h"
#include "nanovllm/server/server_state.h"
#include "nanovllm/utils/version.h"

namespace nanovllm::server {

namespace {

using tcp = net::ip::tcp;
using Request = http::request<http::string_body>;
constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
// Content types, named: GCC 12 miscompiles string literals inside co_await expressions.
constexpr std::string_view kMetricsType = "text/plain; version=0.0.4", kNoType = "", kTextType = "text/plain";
constexpr std::string_view kModelsPrefix = "/v1/models/";
constexpr std::string_view kOutOfDescriptors = "the server is out of file descriptors; try again later";
// Accept errors (out of descriptors) are logged at most once per this interval, with a count.
constexpr auto kAcceptLogInterval = std::chrono::seconds(10);
// A connection answered only with /health or a 503 (past --limit-concurrency, or through the
// reserve descriptor) gets this long to send its request head: a probe sends it with the connect.
constexpr auto kShedReadWindow = std::chrono::milliseconds(50);
// After the grace period, the cut requests get this long to write their error and end.
constexpr auto kCutWindow = std::chrono::seconds(5);

ModelInfo model_info(LLM& llm, const ServerOptions& o) {
  ModelInfo m;
  m.llm = &llm;
  m.root = llm.config().model;
  m.names = o.served_model_names.empty() ? std::vector<std::string>{m.root} : o.served_model_names;
  m.name = m.names.front();
  m.max_model_len = llm.config().max_model_len;
  m.token_ids_only = llm.tokenizer() == nullptr;
  m.reasoning_parser = o.reasoning_parser;
  m.tool_call_parser = o.tool_call_parser;
  m.enable_auto_tool_choice = o.enable_auto_tool_choice;
  m.defaults = o.defaults;
  m.response_role = o.response_role;
  m.structured = llm.config().structured_outputs_config;
  m.force_include_usage = o.force_include_usage;
  m.has_chat_template = o.chat_template_given || (llm.tokenizer() && !llm.tokenizer()->chat_template().empty());
  m.default_chat_template_kwargs = o.default_chat_template_kwargs;
  m.caps = request_caps(llm.config(), llm.model_config().vocab_size);
  return m;
}

// An X-Request-Id header names the request, over the body's request_id (as vLLM).
GenerationRequest with_request_id(GenerationRequest r, const Request& req) {
  if (auto it = req.find("X-Request-Id"); it != req.end() && !it->value().empty()) r.request_id = it->value();
  return r;
}

CacheInfo cache_info(LLM& llm) {
  const EngineConfig& cfg = llm.config();
  CacheInfo c;
  c.block_size = cfg.block_size;
  c.num_blocks = llm.engine_info().num_kv_blocks;
  c.enable_prefix_caching = cfg.enable_prefix_caching;
  c.gpu_memory_utilization = cfg.gpu_memory_utilization;
  return c;
}

// The request target's path, without the query and without --root-path in front (a proxy may
// forward /prefix/v1/... or strip it: both are served).
std::string strip_root_path(std::string_view target, const std::string& root) {
  std::string path(target.substr(0, target.find('?')));
  if (!root.empty() && path.rfind(root, 0) == 0 && (path.size() == root.size() || path[root.size()] == '/'))
    path = path.size() == root.size() ? "/" : path.substr(root.size());
  return path;
}

// "%2F" -> "/" (model ids such as Qwen/Qwen3-0.6B may arrive encoded); malformed escapes stay.
std::string percent_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Constant-time comparison, so the key cannot be guessed byte by byte from response times.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// "application/json", any case, with or without parameters such as "; charset=utf-8".
bool is_json_media_type(std::string_view ct) {
  std::string_view media = ct.substr(0, ct.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  return beast::iequals(media, "application/json");
}

// What a request that Beast could not read gets, if anything (nullopt: close without a word).
// A timeout (idle, or a request sent too slowly) closes the socket: nothing can be answered.
std::optional<ApiError> read_error(const beast::error_code& ec, int64_t max_body) {
  if (ec == http::error::body_limit)
    return ApiError(413, "the request body exceeds the server's limit of " + std::to_string(max_body) + " bytes", "",
                    "payload_too_large");
  if (ec == http::error::header_limit)
    return ApiError(431, "the request line and headers exceed " + std::to_string(kMaxHeaderBytes) + " bytes", "",
                    "headers_too_large");
  if (ec.category() == http::make_error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream)
    return ApiError(400, "malformed HTTP request: " + ec.message(), "", "bad_http");
  return std::nullopt;  // the connection closed or failed
}

// Framing the headers leave ambiguous, refused before any body is read (RFC 9112): a
// Transfer-Encoding other than exactly "chunked" (Beast would read gzip or xchunked as "no body",
// and the body's bytes would run as the next request: 6.3 asks for 400 and close), and an HTTP/1.1
// request without one Host, or any request with several (3.2).
template <class Fields>
std::optional<ApiError> framing_error(const http::request_header<Fields>& req) {
  int encodings = 0;
  for (auto it = req.find(http::field::transfer_encoding);
       it != req.end() && it->name() == http::field::transfer_encoding; ++it) {
    ++encodings;
    if (!beast::iequals(it->value(), "chunked"))
      return ApiError(
          400, "Transfer-Encoding '" + std::string(it->value().substr(0, 64)) + "' is not supported (only chunked)", "",
          "bad_http");
  }
  if (encodings > 1) return ApiError(400, "Transfer-Encoding is given more than once", "", "bad_http");
  const size_t hosts = req.count(http::field::host);
  if (hosts > 1) return ApiError(400, "the Host header is given more than once", "", "bad_http");
  if (hosts == 0 && req.version() >= 11)
    return ApiError(400, "an HTTP/1.1 request needs a Host header", "", "bad_http");
  return std::nullopt;
}

// Completion of a connection's (or the acceptor's) coroutine: an exception that escaped it (out of
// memory, say) ends that connection only, never the I/O thread and with it the server.
void log_escaped(const char* what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "serve: %s ended by an exception: %s\n", what, x.what());
  } catch (...) {
    std::fprintf(stderr, "serve: %s ended by an unknown exception\n", what);
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(LLM& llm, const ServerOptions& o) : st(llm, o, model_info(llm, o), cache_info(llm)) {
    st.started_at = int64_t(std::time(nullptr));
  }
  ServerState st;
  // After st: destroyed first, together with the connection coroutines that refer to st.
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  // A descriptor held back: when the process has none left, it is closed to accept one waiting
  // connection, which gets /health or a 503, then taken again.
  int spare_fd = -1;
  std::chrono::steady_clock::time_point accept_logged_at{};
  int64_t accept_errors_unlogged = 0;
  // Shutdown: drain() waits on this for the in-flight requests, or for stop().
  std::mutex shutdown_mu;
  std::condition_variable shutdown_cv;
  bool stop_now = false;

  ~Impl() {
    st.pool.join();  // its last results go to ioc, which must still be there
    if (spare_fd >= 0) ::close(spare_fd);
  }

  // /health: 200 with an empty body, or 503 with the reason (and a log line when it turns).
  net::awaitable<void> send_health(Connection& c) {
    std::optional<std::string> why;
    if (st.draining)
      why = "the server is shutting down";
    else
      why = st.loop.unhealthy(st.opts.engine_stall_timeout_s);
    if (st.reported_unhealthy.exchange(why.has_value()) != why.has_value()) {
      if (why)
        st.opts.logger.warning("/health: unhealthy: " + *why);
      else
        st.opts.logger.info("/health: healthy again");
    }
    if (why) {
      const ApiError e(503, *why, "", "unhealthy");  // named: no literal inside co_await (GCC 12)
      co_await send_error(c, e);
    } else {
      co_await c.send(http::status::ok, kNoType, std::string());
    }
  }

  net::awaitable<void> send_error(Connection& c, const ApiError& e) {
    st.metrics.on_http_error(e.status);
    Connection::Headers extra;
    if (e.status == 401) extra.emplace_back("WWW-Authenticate", "Bearer");
    co_await c.send_json(http::status(e.status), json_text(e.to_json()), extra);
  }

  static ojson version_response() { return {{"version", kVersion}}; }

  // GET /v1/models/{id}: the served model's card, 404 for any other id.
  ojson model_response(const std::string& encoded_id) const {
    const std::string id = percent_decoded(encoded_id);
    if (!serves(st.model, id))
      throw ApiError(404, "The model '" + id + "' does not exist; this server serves '" + st.model.name + "'", "model",
                     "model_not_found");
    return model_card(st.model, id, st.started_at);
  }

  net::awaitable<void> send_json(Connection& c, const ojson& j) {
    co_await c.send_json(http::status::ok, json_text(j));
  }

  // API key: every /v1 route needs "Authorization: Bearer KEY" when one is set (as vLLM).
  void authorize(const Request& req, std::string_view path) const {
    if (st.opts.api_key.empty() || path.rfind("/v1/", 0) != 0) return;
    const std::string_view auth = req[http::field::authorization];
    if (auth.rfind("Bearer ", 0) == 0 && same_secret(auth.substr(7), st.opts.api_key)) return;
    throw ApiError(401, auth.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key", "",
                   "invalid_api_key");
  }

  // A POST body as a JSON object, checked for the model it names. JSON only: a form or text
  // body is refused (415), so a web page cannot post to the server without a CORS preflight.
  ojson json_body(const Request& req) const {
    if (!is_json_media_type(req[http::field::content_type]))
      throw ApiError(415, "the request body must be JSON: send 'Content-Type: application/json'", "",
                     "unsupported_media_type");
    ojson body = parse_body(req.body());
    check_model(body, st.model);
    return body;
  }

  net::awaitable<void> route(Connection& c, const Request& req) {
    const std::string path = strip_root_path(req.target(), st.opts.root_path);
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
    const CorsAnswer ca =
        cors(st.opts, req.method_string(), req[http::field::origin], req[http::field::access_control_request_method],
             req[http::field::access_control_request_headers]);
    for (auto& [k, v] : ca.headers) c.add_common_header(k, v);
    if (ca.preflight) {  // before authorization: preflights carry no credentials
      const bool ok = ca.refusal.empty();
      std::string body = ok ? std::string("OK") : ca.refusal;  // not in the co_await (GCC 12)
      co_await c.send(ok ? http::status::ok : http::status::bad_request, kTextType, std::move(body));
      co_return;
    }
    std::optional<ApiError> err;
    try {
      authorize(req, path);
      if (st.draining && path != "/health" && path != "/metrics")
        throw ApiError(503, "the server is shutting down", "", "shutting_down");
      if (path == "/health" || path == "/metrics" || path == "/v1/models" || path == "/version" ||
          path.rfind(kModelsPrefix, 0) == 0) {
        if (!get) throw ApiError(405, "method " + std::string(req.method_string()) + " is not allowed on " + path);
        if (path == "/health")
          co_await send_health(c);
        else if (path == "/metrics")
          co_await c.send(http::status::ok, kMetricsType, st.metrics.render());
        else if (path == "/version")
          co_await send_json(c, version_response());
        else if (path == "/v1/models")
          co_await send_json(c, models_response(st.model, st.started_at));
        else
          co_await send_json(c, model_response(path.substr(kModelsPrefix.size())));
      } else if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/tokenize" ||
                 path == "/detokenize") {
        if (!post) throw ApiError(405, "method " + std::string(req.method_string()) + " is not allowed on " + path);
        // Parsing, templates and tokenizing run on the request pool (503 when its queue is full).
        if (path == "/v1/completions" || path == "/v1/chat/completions") {
          auto parse = [&] {
            const ojson body = json_body(req);
            GenerationRequest g = with_request_id(path == "/v1/completions" ? parse_completion_request(body, st.model)
                                                                            : parse_chat_request(body, st.model),
                                                  req);
            check_request_id(g.request_id, st.model);
            return g;
          };
          GenerationRequest g = co_await st.pool.run(std::move(parse));
          co_await serve_generation(st, std::move(g), c);
        } else {
          auto answer = [&] {
            const ojson body = json_body(req);
            return path == "/tokenize" ? tokenize_response(body, st.model) : detokenize_response(body, st.model);
          };
          const ojson out = co_await st.pool.run(std::move(answer));
          co_await send_json(c, out);
        }
      } else if (path == "/v1/embeddings" || path == "/pooling" || path == "/score" || path == "/v1/score" ||
                 path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank") {
        if (!post) throw ApiError(405, "method " + std::string(req.method_string()) + " is not allowed on " + path);
        auto parse = [&] {
          const ojson body = json_body(req);
          PoolingRequest p = path == "/v1/embeddings"
                                 ? parse_embedding_request(body, st.model, PoolingEndpoint::Embeddings)
                             : path == "/pooling" ? parse_embedding_request(body, st.model, PoolingEndpoint::Pooling)
                             : path.ends_with("score") ? parse_score_request(body, st.model)
                                                       : parse_rerank_request(body, st.model);
          check_request_id(p.request_id, st.model);
          return p;
        };
        PoolingRequest p = co_await st.pool.run(std::move(parse));
        co_await serve_pooling(st, std::move(p), c);
      } else if (is_responses_route(path)) {
        // Named, not temporaries: GCC 12 destroys temporaries of a co_await expression twice.
        const auto id = req.find("X-Request-Id");
        std::string header_id = id == req.end() ? std::string() : std::string(id->value());
        std::function<ojson()> body = [&] { return json_body(req); };
        co_await serve_responses_route(st, c, req.method(), path, req.target(), std::move(body), std::move(header_id));
      } else {
        throw ApiError(404, "no route for " + std::string(req.method_string()) + " " + path);
      }
    } catch (const ApiError& e) {
      err = e;
    } catch (const UserError& e) {
      err = ApiError::from(e);
    } catch (const std::exception& e) {
      err = ApiError(500, std::string("internal error: ") + e.what());
    }
    if (!err) co_return;
    if (c.response_started())
      c.close();  // nothing coherent can follow a started response
    else
      co_await send_error(c, *err);
  }

  // One connection: requests are read and answered in order (pipelined ones wait in the buffer).
  net::awaitable<void> session(tcp::socket socket) {
    const auto timeout = std::chrono::seconds(st.opts.keep_alive_timeout_s);
    Connection c(std::move(socket), timeout);
    while (c.open()) {
      http::request_parser<http::string_body> parser;
      apply_request_limits(parser, st.opts.max_body_bytes);
      c.stream().expires_after(timeout);
      auto [ec, n] = co_await http::async_read_header(c.stream(), c.buffer(), parser, use_tuple);
      if (!ec) {
        if (auto e = framing_error(parser.get())) {
          c.stream().expires_never();
          c.begin_response(11, false);
          co_await send_error(c, *e);
          co_await c.close_after_error(std::chrono::seconds(2));
          break;
        }
      }
      if (!ec && beast::iequals(parser.get()[http::field::expect], "100-continue") && !parser.is_done()) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        std::tie(ec, n) = co_await net::async_write(c.stream(), net::buffer(kContinue), use_tuple);
      }
      if (!ec && !parser.is_done())
        std::tie(ec, n) = co_await http::async_read(c.stream(), c.buffer(), parser, use_tuple);
      c.stream().expires_never();
      if (ec) {
        if (auto e = read_error(ec, st.opts.max_body_bytes)) {
          c.begin_response(11, false);
          co_await send_error(c, *e);
          co_await c.close_after_error(std::chrono::seconds(2));
        }
        break;
      }
      const Request& req = parser.get();
      // HTTP/1.2 and later minors are answered as HTTP/1.1 (RFC 9112 2.6); Beast refuses 2.0+.
      // While draining, the connection closes after this answer.
      c.begin_response(req.version() >= 11 ? 11 : 10, req.keep_alive() && !st.draining);
      {
        ++st.in_flight;
        struct Done {
          std::atomic<int64_t>& n;
          ~Done() { --n; }
        } done{st.in_flight};
        co_await route(c, req);
      }
      if (!c.keep_alive()) break;
    }
  }

  // A connection the server will not serve (past --limit-concurrency, or accepted through the
  // reserve descriptor): /health is answered, anything else gets 503 `why`; then it closes.
  net::awaitable<void> shed(tcp::socket socket, std::string why) {
    Connection c(std::move(socket), std::chrono::seconds(1));
    http::request_parser<http::string_body> parser;
    apply_request_limits(parser, st.opts.max_body_bytes);
    // Only a request already sent is read (a timed-out read would close the socket unanswered).
    boost::system::error_code ec;
    if (c.stream().socket().available(ec) == 0 && !ec) {
      net::steady_timer t(c.stream().get_executor(), kShedReadWindow);
      co_await t.async_wait(use_tuple);
    }
    if (c.stream().socket().available(ec) > 0 && !ec) {
      c.stream().expires_after(std::chrono::seconds(1));
      std::tie(ec, std::ignore) = co_await http::async_read_header(c.stream(), c.buffer(), parser, use_tuple);
      c.stream().expires_never();
    } else {
      ec = http::error::end_of_stream;
    }
    c.begin_response(11, false);
    const bool health = !ec && parser.get().method() == http::verb::get &&
                        strip_root_path(parser.get().target(), st.opts.root_path) == "/health";
    const ApiError refusal(503, why, "", "overloaded");  // named: no literal inside co_await (GCC 12)
    if (health)
      co_await send_health(c);
    else
      co_await send_error(c, refusal);
    c.close();
  }

  void spawn_shed(tcp::socket socket, std::string why) {
    auto ex = socket.get_executor();
    net::co_spawn(ex, shed(std::move(socket), std::move(why)),
                  [](std::exception_ptr e) { log_escaped("a refused connection", e); });
  }

  // Out of descriptors and the like, at most one line per kAcceptLogInterval with a count.
  void log_accept_error(const beast::error_code& ec) {
    const auto now = std::chrono::steady_clock::now();
    if (accept_logged_at != std::chrono::steady_clock::time_point{} && now - accept_logged_at < kAcceptLogInterval) {
      ++accept_errors_unlogged;
      return;
    }
    std::string line = "serve: accept failed: " + ec.message();
    if (accept_errors_unlogged > 0)
      line += " (and " + std::to_string(accept_errors_unlogged) + " more times since the last such line)";
    st.opts.logger.log(LogLevel::Error, line);
    accept_logged_at = now;
    accept_errors_unlogged = 0;
  }

  net::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(net::make_strand(ioc), use_tuple);
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        log_accept_error(ec);
        const bool no_fds = ec == net::error::no_descriptors || ec.value() == ENFILE;
        if (no_fds && spare_fd >= 0) {  // the reserve: one waiting connection gets /health or a 503
          ::close(spare_fd);
          spare_fd = -1;
          auto r = co_await acceptor.async_accept(net::make_strand(ioc), use_tuple);
          if (!std::get<0>(r)) spawn_shed(std::move(std::get<1>(r)), std::string(kOutOfDescriptors));
        }
        // Back off instead of spinning; meanwhile that connection is answered, and its descriptor
        // becomes the reserve again.
        net::steady_timer t(ioc, std::chrono::milliseconds(no_fds ? 20 : 100));
        co_await t.async_wait(use_tuple);
        if (spare_fd < 0) spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      if (st.opts.limit_concurrency > 0 && st.connections >= st.opts.limit_concurrency) {
        spawn_shed(std::move(socket), "too many connections (--limit-concurrency " +
                                          std::to_string(st.opts.limit_concurrency) + "); try again later");
        continue;
      }
      ++st.connections;
      net::co_spawn(socket.get_executor(), session(std::move(socket)), [this](std::exception_ptr e) {
        --st.connections;
        log_escaped("a connection", e);
      });
    }
  }

  // Waits until no request is in flight, stop() is called or `until` passes; true if none is left.
  bool wait_in_flight(std::chrono::steady_clock::time_point until) {
    std::unique_lock lk(shutdown_mu);
    while (!stop_now && st.in_flight > 0 && std::chrono::steady_clock::now() < until)
      shutdown_cv.wait_for(lk, std::chrono::milliseconds(20));
    return st.in_flight == 0;
  }
};

HttpServer::HttpServer(LLM& llm, const ServerOptions& opts) : impl_(std::make_unique<Impl>(llm, opts)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::listen_socket(const std::string& host, int port) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(host, ec);
  if (ec) throw UserError("--host " + host + " is not an IP address");
  const tcp::endpoint ep(addr, uint16_t(port));
  const std::string where = "cannot listen on " + host + ":" + std::to_string(port);
  const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw UserError(where + " (" + std::strerror(errno) + ")");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, ep.data(), socklen_t(ep.size())) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int e = errno;
    ::close(fd);
    throw UserError(where + " (" + std::strerror(e) + ")" +
                    (e == EADDRINUSE ? ": another process uses the port; pick another with --port" : ""));
  }
  return fd;
}

int HttpServer::bind(int fd) {
  tcp::acceptor& a = impl_->acceptor;
  boost::system::error_code ec;
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    ec.assign(errno, boost::system::system_category());
  if (!ec) a.assign(sa.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    throw UserError("cannot serve on the listening socket (" + ec.message() + ")");
  }
  return a.local_endpoint().port();
}

void HttpServer::serve() {
  Impl& im = *impl_;
  if (im.spare_fd < 0) im.spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  net::co_spawn(im.ioc, im.accept_loop(), [](std::exception_ptr e) { log_escaped("the acceptor", e); });
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, im.st.opts.http_threads); ++i) threads.emplace_back([&im] { im.ioc.run(); });
  im.ioc.run();
  for (auto& t : threads) t.join();
}

void HttpServer::drain(double grace_s) {
  Impl& im = *impl_;
  if (im.st.draining.exchange(true)) return;
  net::post(im.ioc, [&im] {
    boost::system::error_code ec;
    im.acceptor.close(ec);  // new connections are refused from now on
  });
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const int64_t at_start = im.st.in_flight;
  const Logger& log = im.st.opts.logger;
  char grace[32];
  std::snprintf(grace, sizeof grace, "%g", grace_s);
  log.info("serve: shutting down: " + std::to_string(at_start) + " request(s) in flight get up to " + grace +
           " s to finish (--shutdown-timeout); a second signal stops at once");
  const bool drained = im.wait_in_flight(
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, grace_s))));
  {
    std::lock_guard lk(im.shutdown_mu);
    if (im.stop_now) return;
  }
  if (drained) {
    char took[32];
    std::snprintf(took, sizeof took, "%.2f", std::chrono::duration<double>(Clock::now() - t0).count());
    log.info("serve: drained: the " + std::to_string(at_start) + " request(s) in flight finished in " + took + " s");
  } else {
    log.warning("serve: grace period over: cutting " + std::to_string(im.st.in_flight.load()) +
                " request(s) (streams end with an error event and [DONE], others get 503)");
    im.st.loop.stop();  // open requests fail with 503
    im.wait_in_flight(Clock::now() + kCutWindow);
  }
  im.ioc.stop();
}

void HttpServer::stop() {
  {
    std::lock_guard lk(impl_->shutdown_mu);
    impl_->stop_now = true;
  }
  impl_->shutdown_cv.notify_all();
  impl_->st.loop.stop();
  impl_->ioc.stop();
}

}  // namespace nanovllm::server
