#include "nanovllm/server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "nanovllm/server/generation_handler.h"
#include "nanovllm/server/server_state.h"

namespace nanovllm::server {

namespace {

ModelInfo model_info(LLM& llm, const ServerOptions& o) {
  ModelInfo m;
  m.llm = &llm;
  m.root = llm.engine().config().model;
  m.name = o.served_model_name.empty() ? m.root : o.served_model_name;
  m.max_model_len = llm.engine().config().max_model_len;
  return m;
}

void send_error(ServerState& st, httplib::Response& res, const ApiError& e) {
  st.metrics.on_http_error(e.status);
  res.status = e.status;
  res.set_content(e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Constant-time comparison, so the key cannot be guessed byte by byte from response times.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

struct HttpServer::Impl {
  Impl(LLM& llm, const ServerOptions& o) : st(llm, o, model_info(llm, o)) { st.started_at = int64_t(std::time(nullptr)); }

  ServerState st;
  httplib::Server http;
  std::string host;

  // Wraps a handler: JSON body parsing, model check and ApiError -> OpenAI-style error response.
  template <class F>
  httplib::Server::Handler json_route(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        ojson body = parse_body(req.body);
        check_model(body, st.model);
        f(body, res);
      } catch (const ApiError& e) {
        send_error(st, res, e);
      } catch (const UserError& e) {
        send_error(st, res, ApiError::from(e));
      }
    };
  }

  void json(httplib::Response& res, const ojson& j) {
    res.set_content(j.dump(-1, ' ', false, ojson::error_handler_t::replace), "application/json");
  }

  void routes() {
    const ServerOptions& o = st.opts;
    http.new_task_queue = [n = o.http_threads] { return new httplib::ThreadPool(size_t(n)); };
    http.set_payload_max_length(size_t(o.max_body_bytes));
    http.set_keep_alive_max_count(1000);
    // API key: every /v1 route needs "Authorization: Bearer KEY" when one is set (as vLLM).
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (st.opts.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0 && same_secret(auth.substr(7), st.opts.api_key))
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(st, res, ApiError(401, auth.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key", "",
                                   "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib detects itself (unknown route, oversized body, bad HTTP) get a JSON body too.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string msg = "HTTP " + std::to_string(res.status);
      if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
      if (res.status == 413) msg = "the request body exceeds the server's limit of " + std::to_string(st.opts.max_body_bytes) + " bytes";
      if (res.status == 405) msg = "method " + req.method + " is not allowed on " + req.path;
      const int status = res.status;
      send_error(st, res, ApiError(status, msg, "", status == 413 ? "payload_too_large" : ""));
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(st, res, ApiError(500, "internal error: " + what));
    });

    http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(st.metrics.render(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { json(res, models_response(st.model, st.started_at)); });
    http.Post("/v1/completions", json_route([this](const ojson& b, httplib::Response& res) {
      serve_generation(st, parse_completion_request(b, st.model), res);
    }));
    http.Post("/v1/chat/completions", json_route([this](const ojson& b, httplib::Response& res) {
      serve_generation(st, parse_chat_request(b, st.model), res);
    }));
    http.Post("/tokenize", json_route([this](const ojson& b, httplib::Response& res) { json(res, tokenize_response(b, st.model)); }));
    http.Post("/detokenize", json_route([this](const ojson& b, httplib::Response& res) { json(res, detokenize_response(b, st.model)); }));
  }
};

HttpServer::HttpServer(LLM& llm, const ServerOptions& opts) : impl_(std::make_unique<Impl>(llm, opts)) { impl_->routes(); }

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const ServerOptions& o = impl_->st.opts;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw UserError("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (address in use or not available)");
  return port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }

// The engine loop stops first: open requests fail with 503, so streaming handlers end and
// httplib's thread pool can be joined.
void HttpServer::stop() {
  impl_->st.loop.stop();
  impl_->http.stop();
}

}  // namespace nanovllm::server
