// `nanovllm serve`: an OpenAI-compatible HTTP server (a drop-in for `vllm serve`). Loads the
// model, binds (loopback by default), prints the address, serves until SIGINT/SIGTERM.
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <thread>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#ifndef NANOVLLM_NO_HTTP_SERVER
#include "nanovllm/server/http_server.h"
#endif
#include "nanovllm/server/server_options.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cli {
namespace {

struct ServeArgs {
  EngineFlags engine;
  server::ServerOptions opts;
};

void run(const ServeArgs& a) {
#ifdef NANOVLLM_NO_HTTP_SERVER
  (void)a;
  throw UserError("this build has no HTTP server (cpp-httplib was not found at configure time)");
#else
  if (a.opts.max_body_bytes <= 0) throw UserError("--max-body-bytes must be positive");
  if (a.opts.http_threads < 2) throw UserError("--http-threads must be at least 2");
  // Signals are taken by one waiting thread (sigwait), not by handlers: everything else blocks
  // them, and that thread stops the server cleanly. A closed client socket must not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  LLM llm(a.engine.resolve(), a.engine.tokenizer);
  server::HttpServer srv(llm, a.opts);
  const int port = srv.bind();
  std::printf("nanovllm serve: listening on http://%s:%d (model '%s')\n", a.opts.host.c_str(), port,
              (a.opts.served_model_name.empty() ? a.engine.cfg.model : a.opts.served_model_name).c_str());
  std::fflush(stdout);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) srv.stop();
  });
  srv.serve();
  // serve() may also return on its own (listen failure): wake the waiter so it can be joined.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
#endif
}

}  // namespace

void add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  a->engine.add_to(*cmd);
  auto& o = a->opts;
  cmd->add_option("--host", o.host, "address to bind (default 127.0.0.1; 0.0.0.0 exposes it)");
  cmd->add_option("--port", o.port, "port (0 = any free port, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o.api_key, "require 'Authorization: Bearer KEY' on /v1 routes");
  cmd->add_option("--served-model-name", o.served_model_name, "model name in the API (default: the --model value)");
  cmd->add_option("--max-body-bytes", o.max_body_bytes, "largest request body accepted (else 413)");
  cmd->add_option("--request-timeout", o.request_timeout_s, "seconds after which a request is aborted (0 = never)");
  cmd->add_option("--http-threads", o.http_threads, "connection threads (a streaming client holds one)");
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
