// `nanovllm serve`: the OpenAI-compatible HTTP server. Routes:
//   POST /v1/completions  POST /v1/chat/completions  GET /v1/models  GET /v1/models/{id}
//   GET /health  GET /metrics  GET /version  POST /tokenize  POST /detokenize
// Every route also answers under --root-path; CORS headers and preflights with --allowed-origins.
// Transport: Boost.Beast's HTTP/1.1 parser over Boost.Asio, one C++20 coroutine per connection on
// a few I/O threads (`http_threads`), so thousands of concurrent streams cost no thread each.
// Requests go to the single engine thread (EngineLoop) and come back through RequestChannels.
// Lifecycle under load and abuse: a graceful drain on shutdown, /health from the I/O threads
// (503 with the reason when the engine stalls or fails), --limit-concurrency, and a descriptor in
// reserve so /health is answered when the process runs out of them.
#pragma once
#include <memory>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/server/server_options.h"

namespace nanovllm::server {

class HttpServer {
 public:
  // `llm` must outlive the server; from now on its engine belongs to the engine thread.
  HttpServer(LLM& llm, const ServerOptions& opts);
  ~HttpServer();

  // A socket listening on host:port (port 0 = any free one), made before the model loads so that
  // a port in use fails at once, as vLLM binds first; hand it to bind(). Throws UserError naming
  // the address and why. Also raises the process's open-file limit to its hard limit (a
  // connection holds a descriptor).
  static int listen_socket(const std::string& host, int port);
  // Serves on `fd` (from listen_socket; the server owns it now); returns its port.
  int bind(int fd);
  void serve();  // runs the I/O threads (this one included) until stop()
  void stop();   // thread-safe; the engine loop stops (open requests fail with 503), then the I/O
  // Graceful shutdown (SIGTERM/SIGINT), blocking; call from a thread other than serve()'s: stops
  // accepting at once (requests on open connections get 503), gives the requests in flight up to
  // `grace_s` seconds to finish, then cuts the rest (streams end with an error event and [DONE],
  // others get 503) and stops the I/O, so serve() returns. stop() meanwhile ends it at once.
  void drain(double grace_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm::server
