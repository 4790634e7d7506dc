#include "engine_flags.h"

#include <cstdio>
#include <cstdlib>

#include "nanovllm/backends/backend.h"
#include "nanovllm/config/hf_hub.h"
#include "nanovllm/utils/error.h"
#include "vllm_flags.h"

namespace nanovllm::cli {

namespace {

// CLI11's spelling list ("--tensor-parallel-size"); vLLM's multi-letter short forms (-tp) are
// rewritten by expand_vllm_aliases before parsing.
std::string cli11_names(const Setting& s) {
  std::string names;
  for (const std::string& f : s.flags)
    if (f.rfind("--", 0) == 0 || f.size() == 2) names += (names.empty() ? "" : ",") + f;
  return names;
}

}  // namespace

std::string setting_help(const Setting& s) {
  std::string h = s.help;
  if (s.type == SettingType::Choice) {
    std::string values;
    for (const std::string& c : s.choices) values += (values.empty() ? "" : "|") + c;
    h += " (values " + values + ")";
  } else if (!s.range.empty()) {
    h += " (values " + s.range + ")";
  }
  return h + " [default: " + s.default_text() + "]";
}

void EngineFlags::add_to(CLI::App& app) {
  app.add_option(
      "MODEL", model_arg,
      "model directory, a Hugging Face id in the local cache (ORG/NAME: see --revision, --download-dir; nothing "
      "is downloaded), or a built-in preset (qwen3-0.6b, qwen3-1.7b, qwen3-8b, qwen3-30b-a3b, qwen2.5-0.5b, "
      "qwen2.5-7b, llama-3.2-1b, llama-3.1-8b, mistral-7b)");
  app.add_option("--model,-m", cfg.model, "the model, as MODEL (both given: they must agree)");
  for (const Setting& s : engine_settings()) {
    if (s.flags.empty()) continue;
    Given& g = given[s.name];  // std::map: the reference stays valid as entries are added
    if (s.type == SettingType::Bool || s.type == SettingType::OptionalBool) {
      app.add_flag(cli11_names(s), g.on, setting_help(s));
      if (!s.off_flag.empty()) app.add_flag(s.off_flag, g.off, s.off_help);
    } else {
      const char* type = s.type == SettingType::Int ? "INT" : s.type == SettingType::Float ? "FLOAT" : "TEXT";
      app.add_option(cli11_names(s), g.text, setting_help(s))->type_name(type);
    }
  }
  add_vllm_engine_flags(app, *this);
  app.add_option("--tokenizer", tokenizer,
                 "tokenizer directory or cached Hugging Face id (default: the model's, or the Qwen3 one for presets)");
  app.add_option("--rank", rank, "start just this rank (manual start; starts no other process)");
  app.add_option("--tp-spawned-rank", spawned_rank)->group("");  // hidden: the launcher's workers
  app.add_option("--tp-spawned-port", spawned_port)->group("");
}

std::string chosen_model(const std::string& positional, const std::string& flag) {
  if (!positional.empty() && !flag.empty() && positional != flag)
    throw UserError("the model is given twice and differently: MODEL '" + positional + "' and --model '" + flag + "'");
  const std::string m = positional.empty() ? flag : positional;
  if (m.empty()) throw UserError("no model: give it as the first argument (e.g. nanovllm serve MODEL) or with --model");
  return m;
}

std::string EngineFlags::model() const { return chosen_model(model_arg, cfg.model); }

EngineConfig EngineFlags::resolve() const {
  EngineConfig c = cfg;
  c.model = model();
  // Kernel options are rank 0's only (it sends them to the other ranks, whose own are not used),
  // applied after the NANOVLLM_* environment overrides: once the rank is known.
  const std::string kernel_options = "kernel_options";
  for (const auto& [name, g] : given) {
    const Setting& s = find_setting(name);
    if (name == kernel_options) continue;
    if (g.on && g.off) throw UserError(s.flags.front() + " and " + s.off_flag + " contradict each other");
    if (g.on || g.off)
      s.set(c, g.on);
    else if (!g.text.empty())
      set_setting_text(s, c, g.text);
  }
  if (spawned_rank >= 0) {
    c.tp_rank = spawned_rank;
    c.master_port = spawned_port;
  } else if (rank >= 0) {
    c.tp_rank = rank;
  } else if (c.nnodes > 0 && c.tensor_parallel_size % c.nnodes == 0) {
    c.tp_rank = c.node_rank * c.ranks_per_node();  // this process; the launcher starts the node's others
  }
  if (rank >= 0 && c.tensor_parallel_size > 1 && c.master_port == 0)
    throw UserError("--rank: a manual start needs --master-port (and --master-addr unless rank 0 is on this host)");
  if (c.tp_rank == 0) {
    apply_kernel_env_overrides(c.kernels, [](const char* name) { return std::getenv(name); });
    if (const auto it = given.find(kernel_options); it != given.end() && !it->second.text.empty())
      set_setting_text(find_setting(kernel_options), c, it->second.text);
  }
  check_vllm_engine_flags(*this, c);
  c.validate();
  settle_model_dir(c);  // a Hugging Face id -> its snapshot in the local cache (or a clear error), once
  return c;
}

void print_kernel_options(const EngineConfig& cfg) {
  if (cfg.tp_rank != 0) return;
  if (cfg.kv_cache_dtype != KVCacheDtype::Auto)
    std::fprintf(stderr, "kv cache dtype: %s\n", kv_cache_dtype_name(cfg.kv_cache_dtype));
  if (cfg.quantization != Quantization::None)
    std::fprintf(stderr, "quantization: %s\n", quantization_name(cfg.quantization));
  if (resolved_device(cfg.device) != DeviceChoice::Cuda) return;
  std::fprintf(stderr, "kernel options: %s\n", cfg.kernels.to_string().c_str());
  std::fflush(stderr);
}

}  // namespace nanovllm::cli
