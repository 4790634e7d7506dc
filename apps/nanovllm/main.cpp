// nanovllm: generate | bench | bench-serve (= bench serve) | tokenize | settings (| serve). User errors print one line
// and exit 2; unknown flags and commands come with a "did you mean".
#include <cstdio>
#include <new>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "did_you_mean.h"
#include "nanovllm/dist/socket.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/version.h"
#include "vllm_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"nano-vllm in C++: a fast, readable LLM inference engine"};
  app.require_subcommand(1);
  nanovllm::cli::take_last_repeated_values(app);
  app.set_version_flag("--version", nanovllm::kVersion);
  nanovllm::cli::add_generate(app);
  nanovllm::cli::add_bench(app);
  nanovllm::cli::add_bench_serve(app);
  nanovllm::cli::add_tokenize(app);
  nanovllm::cli::add_serve(app);
  nanovllm::cli::add_settings(app);
  // The settings' spellings CLI11 cannot express (vLLM's -tp), then CLI11's argument order (last first).
  std::vector<std::string> args = nanovllm::cli::expand_vllm_aliases({argv + 1, argv + argc});
  // vLLM spells the serving benchmark `vllm bench serve`: the same as `nanovllm bench-serve`.
  if (args.size() >= 2 && args[0] == "bench" && args[1] == "serve") {
    args.erase(args.begin());
    args[0] = "bench-serve";
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    nanovllm::cli::check_subcommand(app, args);
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown flag is the likeliest cause: name it, with the nearest known one.
    const std::string unknown = nanovllm::cli::unknown_flag_message(app, args);
    std::fprintf(stderr, "error: %s\n", unknown.empty() ? e.what() : unknown.c_str());
    return 2;
  } catch (const nanovllm::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const nanovllm::PeerLostError& e) {  // another tensor-parallel rank died
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const nanovllm::ResourceError& e) {  // explained: too little memory for the model or cache
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of host memory (the model or its KV cache does not fit)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
