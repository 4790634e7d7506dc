// Engine flags shared by generate, bench and serve, with vLLM's names.
#pragma once
#include <CLI/CLI.hpp>

#include "nanovllm/config/config.h"

namespace nanovllm::cli {

struct EngineFlags {
  EngineConfig cfg;
  std::string model_arg;  // the positional MODEL (vLLM: `vllm serve MODEL`); --model is the other spelling
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  std::string quantization = "none";
  bool trust_remote_code = false;
  std::string load_format = "auto";
  std::string tokenizer;
  std::string kernel_options;  // --kernel-options KEY=VALUE[,KEY=VALUE...]
  bool no_prefix_caching = false;
  bool prefix_caching = false;
  bool no_chunked_prefill = false;
  bool chunked_prefill = false;
  bool async_scheduling = false;
  bool no_async_scheduling = false;
  int rank = -1;          // --rank: explicit (manual start); -1: the launcher decides
  int spawned_rank = -1;  // hidden: set by the launcher on the workers it starts
  int spawned_port = 0;

  void add_to(CLI::App& app);
  // The model named by MODEL or --model (one of them, the same if both); throws UserError.
  std::string model() const;
  // Resolves the flags into cfg (load format, prefix caching, tensor-parallel rank, and on rank 0
  // the kernel options: NANOVLLM_* environment overrides, then --kernel-options); throws UserError.
  EngineConfig resolve() const;
  bool spawned() const { return spawned_rank >= 0; }
};

// The model of MODEL (positional) and --model: either, or both when they agree; throws UserError.
std::string chosen_model(const std::string& positional, const std::string& flag);

// Prints "kv cache dtype: fp8_e4m3" (unless auto) and, when cfg runs on CUDA, "kernel options:
// pdl=on ..." to stderr (rank 0: the options every rank uses). The start-up lines of generate,
// bench and serve.
void print_kernel_options(const EngineConfig& cfg);

}  // namespace nanovllm::cli
