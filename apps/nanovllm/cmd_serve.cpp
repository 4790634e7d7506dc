// `nanovllm serve`: an OpenAI-compatible HTTP server (a drop-in for `vllm serve`). Loads the
// model, binds (loopback by default), prints the address, serves until SIGINT/SIGTERM: the first
// drains (in-flight requests get --shutdown-timeout seconds), a second stops at once.
#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <thread>
#include <utility>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/backends/backend.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/frontend/tensor_parallel_start.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/output/tool_parser.h"
#include "startup_log.h"
#include "vllm_flags.h"
#ifndef NANOVLLM_NO_HTTP_SERVER
#include "nanovllm/server/http_server.h"
#endif
#include "nanovllm/server/server_options.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/version.h"

namespace nanovllm::cli {
namespace {

// Write end of the stop pipe, for the signal handler: the one piece of process-wide state, set
// once before the handlers are installed.
#ifndef NANOVLLM_NO_HTTP_SERVER
int stop_pipe_write = -1;
#endif

// vLLM's rules for the output-parser flags, checked before the model loads.
void check_output_parsers(const server::ServerOptions& o) {
  if (!o.reasoning_parser.empty() && !output::is_reasoning_parser(o.reasoning_parser))
    throw UserError("--reasoning-parser " + o.reasoning_parser +
                    ": unknown (available: " + output::reasoning_parser_names() + ")");
  if (!o.tool_call_parser.empty() && !output::is_tool_parser(o.tool_call_parser))
    throw UserError("--tool-call-parser " + o.tool_call_parser +
                    ": unknown (available: " + output::tool_parser_names() + ")");
  if (o.enable_auto_tool_choice && o.tool_call_parser.empty())
    throw UserError("--enable-auto-tool-choice requires --tool-call-parser");
}

#ifndef NANOVLLM_NO_HTTP_SERVER
// The listening socket until the server takes it (closed if start-up fails before).
struct ListenSocket {
  int fd = -1;
  ListenSocket() = default;
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;
  ~ListenSocket() {
    if (fd >= 0) close(fd);
  }
};
#endif

struct ServeArgs {
  EngineFlags engine;
  VllmServeFlags vllm;
  server::ServerOptions opts;
  bool skip_tokenizer_init = false;
};

void run(ServeArgs& a) {
#ifdef NANOVLLM_NO_HTTP_SERVER
  (void)a;
  throw UserError("this build has no HTTP server (Boost 1.81 was not found at configure time)");
#else
  if (a.opts.max_body_bytes <= 0) throw UserError("--max-body-bytes must be positive");
  if (a.opts.http_threads < 1) throw UserError("--http-threads must be at least 1");
  if (a.opts.keep_alive_timeout_s < 1) throw UserError("--keep-alive-timeout must be at least 1 second");
  if (!(a.opts.shutdown_timeout_s >= 0)) throw UserError("--shutdown-timeout must be >= 0 seconds");
  if (!(a.opts.engine_stall_timeout_s >= 0)) throw UserError("--engine-stall-timeout must be >= 0 seconds");
  if (a.opts.limit_concurrency < 0) throw UserError("--limit-concurrency must be >= 0 (0 = no limit)");
  if (a.opts.max_pending_output_bytes < 0) throw UserError("--max-pending-output-bytes must be >= 0 (0 = no bound)");
  if (!(a.opts.testing_stall_engine_s >= 0)) throw UserError("--testing-stall-engine must be >= 0 seconds");
  EngineConfig cfg = a.engine.resolve();
  // Serving keeps the streams' latency by default (--target-itl-ms; offline runs keep throughput).
  settle_target_itl(cfg, true, resolved_device(cfg.device) == DeviceChoice::Cuda);
  // vLLM's --structured-outputs-config may name the reasoning parser too.
  if (const std::string& p = cfg.structured_outputs_config.reasoning_parser; !p.empty()) {
    if (a.opts.reasoning_parser.empty())
      a.opts.reasoning_parser = p;
    else if (a.opts.reasoning_parser != p)
      throw UserError("--reasoning-parser " + a.opts.reasoning_parser + " and --structured-outputs-config's " +
                      "reasoning_parser " + p + " disagree");
  }
  check_output_parsers(a.opts);
  apply_vllm_serve_flags(a.vllm, cfg.model_path(), a.opts);
  const std::string chat_template = read_chat_template_flag(a.vllm.chat_template);
  a.opts.chat_template_given = !chat_template.empty();
  // A server without a tokenizer answers text prompts with errors and returns no text: only on request.
  if (!a.skip_tokenizer_init && find_tokenizer_dir(cfg, a.engine.tokenizer).empty()) {
    std::string where = "looked in the model directory " + cfg.model_path();
    if (preset_model_config(cfg.model)) {
      where = "";
      for (auto& d : preset_tokenizer_dirs(preset_tokenizer_name(cfg.model)))
        where += (where.empty() ? "looked in " : ", ") + d;
      if (where.empty()) where = "none is bundled for this preset";
    }
    throw UserError("no tokenizer.json for '" + cfg.model + "' (" + where +
                    "); pass --tokenizer DIR, or --skip-tokenizer-init to serve token ids only");
  }
  // The port first (vLLM binds before building the engine too): one in use fails now, not after
  // minutes of loading. Rank 0 serves; the other ranks never listen.
  ListenSocket listener;
  if (cfg.tp_rank == 0 && !a.engine.spawned())
    listener.fd = server::HttpServer::listen_socket(a.opts.host, a.opts.port);
  TpStart tp = start_tensor_parallel(cfg, a.engine.starts_other_ranks());
  if (tp.worker) return run_worker(cfg, a.engine.spawned());
  print_kernel_options(cfg);
  // SIGINT/SIGTERM stop the server cleanly: the handler only writes a byte to a pipe (all it may
  // safely do), a waiting thread reads it and stops the server. (Blocking the signals and using
  // sigwait is not enough: OpenBLAS starts threads before main, and those would take them.)
  std::signal(SIGPIPE, SIG_IGN);  // a closed client socket must not kill us
  int fds[2];
  if (pipe(fds) != 0) throw Error("serve: pipe() failed");
  stop_pipe_write = fds[1];
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    const char c = 1;
    (void)!write(stop_pipe_write, &c, 1);
  };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  LLM llm(cfg, a.engine.tokenizer, a.skip_tokenizer_init);
  if (!chat_template.empty()) llm.set_chat_template(chat_template);
  log_startup(a.opts, llm);
  server::HttpServer srv(llm, a.opts);
  const int port = srv.bind(std::exchange(listener.fd, -1));
  std::printf("nanovllm serve %s: listening on http://%s:%d (model '%s')\n", kVersion, a.opts.host.c_str(), port,
              (a.opts.served_model_names.empty() ? cfg.model : a.opts.served_model_names.front()).c_str());
  std::fflush(stdout);
  // The first signal drains (on its own thread, so that the waiter hears a second one), the
  // second stops at once.
  std::thread drainer;
  std::thread waiter([&] {
    char c = 0;
    if (read(fds[0], &c, 1) != 1 || c != 1) return;
    drainer = std::thread([&] { srv.drain(a.opts.shutdown_timeout_s); });
    if (read(fds[0], &c, 1) == 1 && c == 1) {
      a.opts.logger.warning("serve: second signal: stopping now");
      srv.stop();
    }
  });
  srv.serve();
  // serve() may also return on its own: wake the waiter with a byte that does not stop anything.
  const char wake = 0;
  (void)!write(fds[1], &wake, 1);
  waiter.join();
  if (drainer.joinable()) drainer.join();
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
  cmd->add_option("--api-key", o.api_key,
                  "require 'Authorization: Bearer KEY' on /v1 routes (default: $VLLM_API_KEY, if set)");
  cmd->add_option("--served-model-name", o.served_model_names,
                  "model name(s) in the API, each answered; responses report the first (default: the --model value)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--max-body-bytes", o.max_body_bytes, "largest request body accepted (else 413)");
  cmd->add_flag("--skip-tokenizer-init", a->skip_tokenizer_init,
                "serve without a tokenizer: prompts are token ids, responses carry token_ids and no text");
  cmd->add_option("--request-timeout", o.request_timeout_s, "seconds after which a request is aborted (0 = never)");
  cmd->add_option("--http-threads", o.http_threads,
                  "I/O threads serving the connections (each connection is a coroutine)");
  cmd->add_option("--keep-alive-timeout", o.keep_alive_timeout_s,
                  "seconds an idle connection, or one sending a request, may take");
  cmd->add_option("--shutdown-timeout", o.shutdown_timeout_s,
                  "on SIGTERM/SIGINT, seconds in-flight requests get to finish before they are cut "
                  "(0 = cut at once; a second signal always stops at once)");
  cmd->add_option("--engine-stall-timeout", o.engine_stall_timeout_s,
                  "/health answers 503 when the engine has made no progress this many seconds with work pending "
                  "(0 = never)");
  cmd->add_option("--limit-concurrency", o.limit_concurrency,
                  "most open connections; past it new ones get 503 and close, /health still answers (0 = none)");
  cmd->add_option("--max-pending-output-bytes", o.max_pending_output_bytes,
                  "output bytes a request may have waiting for a client that does not read; past it the request "
                  "is aborted and the connection closed (0 = no bound)");
  // Hidden test hook of /health's watchdog: never useful in production.
  cmd->add_option("--testing-stall-engine", o.testing_stall_engine_s,
                  "TEST HOOK: the engine thread sleeps this many seconds before its first step")
      ->group("");
  cmd->add_option("--reasoning-parser", o.reasoning_parser,
                  "split <think> reasoning into reasoning_content (chat): " + output::reasoning_parser_names());
  cmd->add_option("--tool-call-parser", o.tool_call_parser,
                  "parse tool calls of the model's output (chat): " + output::tool_parser_names());
  cmd->add_flag("--enable-auto-tool-choice", o.enable_auto_tool_choice,
                "tool_choice \"auto\": the model's tool calls become tool_calls (needs --tool-call-parser)");
  add_vllm_serve_flags(*cmd, a->vllm, o);
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
