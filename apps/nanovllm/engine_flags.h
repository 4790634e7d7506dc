// Engine flags shared by generate, bench and serve, with vLLM's names.
#pragma once
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "nanovllm/config/settings.h"

namespace nanovllm::cli {

struct EngineFlags {
  // What the command line gave for one setting of the table (config/settings.h).
  struct Given {
    std::string text;              // options
    bool on = false, off = false;  // flags: --x / --no-x
  };

  EngineConfig cfg;
  std::string model_arg;               // the positional MODEL (vLLM: `vllm serve MODEL`); --model is the other spelling
  std::map<std::string, Given> given;  // setting name -> its flags' values (filled by CLI11)
  std::string dtype = "auto";
  bool trust_remote_code = false;
  std::string swap_space, compilation_config;  // vLLM's; accepted with a note (nothing to swap or compile)
  std::string tokenizer;
  int rank = -1;          // --rank: explicit (manual start); -1: the launcher decides
  int spawned_rank = -1;  // hidden: set by the launcher on the workers it starts
  int spawned_port = 0;

  // MODEL, --model, every setting of the table with a CLI spelling, and the flags that are not
  // engine settings (--tokenizer, --rank, vLLM's --dtype and --trust-remote-code, hidden ones).
  void add_to(CLI::App& app);
  // The model named by MODEL or --model (one of them, the same if both); throws UserError.
  std::string model() const;
  // Resolves the flags into a validated cfg (the settings given, the tensor-parallel rank, and on
  // rank 0 the kernel options: NANOVLLM_* environment overrides, then --kernel-options); throws
  // UserError.
  EngineConfig resolve() const;
  bool spawned() const { return spawned_rank >= 0; }
  // Without --rank, and not started by a launcher: this process starts its node's other ranks.
  bool starts_other_ranks() const { return rank < 0 && !spawned(); }
};

// The --help text of a setting: its help, values and default.
std::string setting_help(const Setting& s);

// The model of MODEL (positional) and --model: either, or both when they agree; throws UserError.
std::string chosen_model(const std::string& positional, const std::string& flag);

// Prints "kv cache dtype: fp8_e4m3" (unless auto) and, when cfg runs on CUDA, "kernel options:
// pdl=on ..." to stderr (rank 0: the options every rank uses). The start-up lines of generate,
// bench and serve.
void print_kernel_options(const EngineConfig& cfg);

}  // namespace nanovllm::cli
