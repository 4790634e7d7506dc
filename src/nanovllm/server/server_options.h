// Options of `nanovllm serve` (the HTTP side; the engine has its own EngineConfig).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/config/generation_defaults.h"
#include "nanovllm/utils/log.h"

namespace nanovllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback by default: exposing it is an explicit choice
  int port = 8000;                 // 0 = any free port (the chosen one is printed)
  std::string api_key;             // empty = no authentication
  // --served-model-name: every name answers (requests' "model", /v1/models lists them all); the
  // first is the one responses report. Empty: the --model value, as vLLM does.
  std::vector<std::string> served_model_names;
  int64_t max_body_bytes = 8 << 20;  // larger request bodies get 413, whatever their framing
  double request_timeout_s = 600;    // a request running longer is aborted (0 = never)
  int http_threads = 4;              // I/O threads; connections are coroutines, not threads
  int keep_alive_timeout_s = 30;     // an idle connection, or one sending a request this long, closes
  // --shutdown-timeout (vLLM's name): on SIGTERM/SIGINT, seconds in-flight requests get to finish
  // before they are cut (streams: an error event and [DONE]; others: 503). 0 = cut at once
  // (vLLM's default); ours drains, in time for Kubernetes' default 30 s terminationGracePeriod.
  double shutdown_timeout_s = 25;
  // --engine-stall-timeout: /health answers 503 when the engine has made no progress this long
  // while work is pending (0 = never). One step is milliseconds to a few seconds (a long prefill
  // on a slow device); 60 s is far past any legitimate step and well inside a probe's patience.
  double engine_stall_timeout_s = 60;
  // --limit-concurrency (uvicorn's): connections past this get 503 and close (/health is still
  // answered); 0 = bounded only by the descriptors, one of which is kept in reserve for /health.
  int64_t limit_concurrency = 0;
  // --max-pending-output-bytes: output waiting for a client that does not read, per request; past
  // it the request is aborted and the connection closed.
  int64_t max_pending_output_bytes = 8 << 20;
  double testing_stall_engine_s = 0;     // --testing-stall-engine: test hook of the /health watchdog
  std::string reasoning_parser;          // --reasoning-parser (qwen3): <think> -> reasoning_content
  std::string tool_call_parser;          // --tool-call-parser (hermes)
  bool enable_auto_tool_choice = false;  // --enable-auto-tool-choice: tool_choice "auto" parses tool calls
  // CORS (vLLM's --allowed-origins/-methods/-headers). No origins: no CORS headers and no preflight.
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_methods{"*"}, allowed_headers{"*"};
  std::string root_path;                    // a proxy's path prefix, accepted in front of every route
  std::string response_role = "assistant";  // the role of chat responses
  bool log_requests = false;                // a line per request received and finished
  bool log_stats = true;                    // the periodic stats line while busy
  double log_stats_interval_s = 10;
  Logger logger;                     // --log-level
  GenerationDefaults defaults;       // generation_config.json / --override-generation-config
  bool chat_template_given = false;  // --chat-template (else the tokenizer's, if it has one)
  bool force_include_usage = false;  // --enable-force-include-usage: usage in every stream
  // --default-chat-template-kwargs: a request's chat_template_kwargs are merged over these.
  nlohmann::ordered_json default_chat_template_kwargs = nlohmann::ordered_json::object();
};

}  // namespace nanovllm::server
