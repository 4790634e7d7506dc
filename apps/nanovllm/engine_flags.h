// Engine flags shared by generate, bench and serve, with vLLM's names.
#pragma once
#include <CLI/CLI.hpp>

#include "nanovllm/config.h"

namespace nanovllm::cli {

struct EngineFlags {
  EngineConfig cfg;
  std::string load_format = "auto";
  std::string tokenizer;
  bool no_prefix_caching = false;
  bool prefix_caching = false;

  void add_to(CLI::App& app, bool model_required = true);
  // Resolves the flags into cfg (load format, prefix caching); throws UserError.
  EngineConfig resolve() const;
};

}  // namespace nanovllm::cli
