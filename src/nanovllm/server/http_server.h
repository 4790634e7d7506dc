// `nanovllm serve`: the OpenAI-compatible HTTP server. Routes:
//   POST /v1/completions  POST /v1/chat/completions  GET /v1/models
//   GET /health  GET /metrics  POST /tokenize  POST /detokenize
// Handlers run on httplib's thread pool and talk to the single engine thread (EngineLoop).
#pragma once
#include <memory>

#include "nanovllm/llm.h"
#include "nanovllm/server/server_options.h"

namespace nanovllm::server {

class HttpServer {
 public:
  // `llm` must outlive the server; from now on its engine belongs to the engine thread.
  HttpServer(LLM& llm, const ServerOptions& opts);
  ~HttpServer();

  // Binds host:port (port 0 = any free one); returns the port. Throws UserError when it cannot.
  int bind();
  void serve();  // blocks until stop()
  void stop();   // thread-safe; in-flight requests end, the engine loop stops

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm::server
