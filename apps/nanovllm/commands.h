// The subcommands of the `nanovllm` CLI; each registers its options and a callback.
#pragma once
#include <CLI/CLI.hpp>

namespace nanovllm::cli {

void add_generate(CLI::App& app);
void add_bench(CLI::App& app);
void add_bench_serve(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_serve(CLI::App& app);
void add_settings(CLI::App& app);  // the engine settings table (README)

}  // namespace nanovllm::cli
