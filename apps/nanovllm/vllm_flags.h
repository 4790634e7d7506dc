// vLLM's command-line flags that are not engine settings (config/settings.h): the ones every engine
// subcommand takes (--dtype, --trust-remote-code) and the server's
// (chat template, generation config, request/stats logs, CORS, root path, response role, log
// levels, VLLM_API_KEY). Each is honoured where it means something here, accepted with a one-line
// note where it cannot apply, and refused with a clear message otherwise.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "nanovllm/config/config.h"
#include "nanovllm/server/server_options.h"

namespace nanovllm::cli {

struct EngineFlags;

// argparse's rule for `app` and the subcommands added after: a flag given twice keeps its last
// value (vLLM's command lines rely on it); list options keep every value.
void take_last_repeated_values(CLI::App& app);

// argv with the settings' spellings that CLI11 cannot express (vLLM's -tp) replaced by their
// canonical ones (--tensor-parallel-size).
std::vector<std::string> expand_vllm_aliases(std::vector<std::string> args);

void add_vllm_engine_flags(CLI::App& app, EngineFlags& f);
// --dtype against what the resolved device computes in, --trust-remote-code's note (rank 0 only).
// Throws UserError.
void check_vllm_engine_flags(const EngineFlags& f, const EngineConfig& cfg);

struct VllmServeFlags {
  std::string chat_template;  // a file, or the template itself
  std::string generation_config = "auto";
  std::string override_generation_config;
  bool enable_log_requests = false, disable_log_requests = false, disable_log_stats = false;
  std::string allowed_origins, allowed_methods, allowed_headers;  // JSON lists
  std::string uvicorn_log_level, log_level;
  std::string max_log_len;                   // accepted with a note
  bool enable_request_id_headers = false;    // accepted with a note
  std::string default_chat_template_kwargs;  // JSON object
};

void add_vllm_serve_flags(CLI::App& cmd, VllmServeFlags& f, server::ServerOptions& o);
// Fills `o` from the flags (CORS lists, logs, levels, generation defaults of `model_dir`,
// VLLM_API_KEY when --api-key is not given). Throws UserError; runs before the model loads.
void apply_vllm_serve_flags(const VllmServeFlags& f, const std::string& model_dir, server::ServerOptions& o);

// --chat-template FILE_OR_STRING -> the template's text ("" when not given); a value that is no
// file and holds no Jinja tag is refused.
std::string read_chat_template_flag(const std::string& value);

}  // namespace nanovllm::cli
