#include "vllm_flags.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine_flags.h"
#include "nanovllm/backends/backend.h"
#include "nanovllm/tokenizer/chat_template.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cli {

namespace {

// A JSON list of strings (vLLM's CORS flags: --allowed-origins '["https://a.example"]').
std::vector<std::string> json_list(const std::string& flag, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UserError(flag + " " + text + ": must be a JSON list of strings, e.g. '[\"*\"]'");
  }
  if (!j.is_array()) throw UserError(flag + " " + text + ": must be a JSON list of strings, e.g. '[\"*\"]'");
  std::vector<std::string> out;
  for (auto& v : j) {
    if (!v.is_string()) throw UserError(flag + " " + text + ": must be a JSON list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

void take_last_repeated_values(CLI::App& app) {
  // TakeLast keeps the last `expected` values: one for a scalar, all of them for a list.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

std::vector<std::string> expand_vllm_aliases(std::vector<std::string> args) {
  for (const Setting& s : engine_settings())
    for (const std::string& f : s.flags) {
      if (f.rfind("--", 0) == 0 || f.size() <= 2) continue;  // CLI11 takes these
      for (auto& a : args) {
        if (a == f) a = s.flags.front();
        if (a.rfind(f + "=", 0) == 0) a = s.flags.front() + a.substr(f.size());
      }
    }
  return args;
}

void add_vllm_engine_flags(CLI::App& app, EngineFlags& f) {
  app.add_option(
      "--dtype", f.dtype,
      "auto (the device's: bfloat16 on CUDA, float32 on the CPU), or that dtype by name; others are refused");
  app.add_flag("--trust-remote-code", f.trust_remote_code, "accepted for vLLM's command lines; nothing remote is run");
  app.add_option("--swap-space", f.swap_space,
                 "vLLM's CPU swap space (GiB): accepted, not used (preemption recomputes)");
  app.add_option("-O,--compilation-config", f.compilation_config,
                 "vLLM's torch.compile level or JSON: accepted, not used (no torch.compile; CUDA graphs: "
                 "--enforce-eager)");
}

void check_vllm_engine_flags(const EngineFlags& f, const EngineConfig& cfg) {
  check_dtype_choice(f.dtype, resolved_device(cfg.device));
  if (cfg.tp_rank != 0 || f.spawned()) return;
  if (f.trust_remote_code)
    std::fprintf(stderr, "note: --trust-remote-code accepted; nothing remote is run (the Qwen3 code is built in)\n");
  if (!cfg.code_revision.empty())
    std::fprintf(stderr, "note: --code-revision %s accepted; no remote code is run (the model code is built in)\n",
                 cfg.code_revision.c_str());
  if (!f.swap_space.empty())
    std::fprintf(stderr, "note: --swap-space accepted and not used (preempted sequences are recomputed)\n");
  if (!f.compilation_config.empty())
    std::fprintf(stderr, "note: -O/--compilation-config accepted and not used (no torch.compile here)\n");
}

void add_vllm_serve_flags(CLI::App& cmd, VllmServeFlags& f, server::ServerOptions& o) {
  cmd.add_option("--chat-template", f.chat_template, "a chat template file, or the template itself (Jinja)");
  cmd.add_option("--generation-config", f.generation_config,
                 "auto (the model's generation_config.json sets default sampling params), vllm (ignore it) or a "
                 "directory holding one");
  cmd.add_option("--override-generation-config", f.override_generation_config,
                 "JSON merged over the generation config, e.g. '{\"temperature\": 0.5}'");
  cmd.add_flag("--enable-log-requests", f.enable_log_requests, "log each request received and finished");
  cmd.add_flag("--disable-log-requests", f.disable_log_requests, "no request logs (the default)");
  cmd.add_flag("--disable-log-stats", f.disable_log_stats, "no periodic stats line");
  cmd.add_option("--allowed-origins", f.allowed_origins,
                 "CORS: JSON list of origins, e.g. '[\"*\"]' (unset: no CORS headers, no preflight)");
  cmd.add_option("--allowed-methods", f.allowed_methods, "CORS: JSON list of methods (default [\"*\"])");
  cmd.add_option("--allowed-headers", f.allowed_headers, "CORS: JSON list of request headers (default [\"*\"])");
  cmd.add_option("--root-path", o.root_path, "path prefix a proxy adds (routes are served with and without it)");
  cmd.add_option("--response-role", o.response_role, "the role of chat completion messages (default assistant)");
  cmd.add_option("--uvicorn-log-level", f.uvicorn_log_level, "vLLM's HTTP log level, mapped to --log-level");
  cmd.add_option("--log-level", f.log_level, "debug, info (default), warning, error or critical");
  cmd.add_option("--log-stats-interval", o.log_stats_interval_s)->group("");  // hidden: tests (vLLM: 10 s)
  cmd.add_option("--max-log-len", f.max_log_len, "vLLM's prompt length in request logs: accepted, not used");
  cmd.add_flag("--enable-request-id-headers", f.enable_request_id_headers,
               "vLLM's X-Request-Id response header: accepted, not used");
  cmd.add_flag("--enable-force-include-usage", o.force_include_usage,
               "usage in every streamed response (as stream_options.include_usage)");
  cmd.add_option(
      "--default-chat-template-kwargs", f.default_chat_template_kwargs,
      "JSON object: the defaults of chat requests' chat_template_kwargs, e.g. '{\"enable_thinking\": false}'");
}

void apply_vllm_serve_flags(const VllmServeFlags& f, const std::string& model_dir, server::ServerOptions& o) {
  if (f.enable_log_requests && f.disable_log_requests)
    throw UserError("--enable-log-requests and --disable-log-requests contradict each other");
  o.log_requests = f.enable_log_requests;
  o.log_stats = !f.disable_log_stats;
  if (!f.allowed_origins.empty()) o.allowed_origins = json_list("--allowed-origins", f.allowed_origins);
  if (!f.allowed_methods.empty()) o.allowed_methods = json_list("--allowed-methods", f.allowed_methods);
  if (!f.allowed_headers.empty()) o.allowed_headers = json_list("--allowed-headers", f.allowed_headers);
  if (!o.root_path.empty() && (o.root_path[0] != '/' || o.root_path.find_first_of("?# ") != std::string::npos))
    throw UserError("--root-path " + o.root_path + ": must be a path starting with /");
  while (o.root_path.size() > 1 && o.root_path.back() == '/') o.root_path.pop_back();
  if (o.root_path == "/") o.root_path.clear();
  if (o.response_role.empty()) throw UserError("--response-role must not be empty");
  if (!(o.log_stats_interval_s > 0)) throw UserError("--log-stats-interval must be positive");
  LogLevel level = LogLevel::Info;
  if (!f.uvicorn_log_level.empty()) level = parse_log_level(f.uvicorn_log_level, "--uvicorn-log-level");
  if (!f.log_level.empty()) level = parse_log_level(f.log_level, "--log-level");
  o.logger = Logger(level);
  if (o.api_key.empty())
    if (const char* k = std::getenv("VLLM_API_KEY"); k && *k) o.api_key = k;
  o.defaults = load_generation_defaults(f.generation_config, model_dir, f.override_generation_config);
  if (!f.default_chat_template_kwargs.empty()) {
    const std::string& t = f.default_chat_template_kwargs;
    try {
      o.default_chat_template_kwargs = nlohmann::ordered_json::parse(t);
    } catch (const nlohmann::json::exception&) {
      throw UserError("--default-chat-template-kwargs " + t +
                      ": not JSON (want an object, e.g. '{\"enable_thinking\": false}')");
    }
    if (!o.default_chat_template_kwargs.is_object())
      throw UserError("--default-chat-template-kwargs " + t + ": must be a JSON object");
  }
  if (!f.max_log_len.empty())
    std::fprintf(stderr, "note: --max-log-len accepted and not used (no prompts are logged)\n");
  if (f.enable_request_id_headers) std::fprintf(stderr, "note: --enable-request-id-headers accepted and not used\n");
}

std::string read_chat_template_flag(const std::string& value) {
  if (value.empty()) return "";
  std::error_code ec;
  std::string text = value;
  if (std::filesystem::is_regular_file(value, ec)) {
    std::ifstream in(value);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (!in) throw UserError("--chat-template " + value + ": cannot read the file");
    text = ss.str();
  } else if (value.find("{{") == std::string::npos && value.find("{%") == std::string::npos) {
    throw UserError("--chat-template " + value + ": no such file, and not a Jinja template either");
  }
  try {
    ChatTemplate check(text);  // syntax errors now, before the model loads
  } catch (const TokenizerError& e) {
    throw UserError("--chat-template: " + std::string(e.what()));
  }
  return text;
}

}  // namespace nanovllm::cli
