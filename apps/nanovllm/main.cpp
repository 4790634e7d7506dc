// nanovllm: generate | bench | bench-serve | tokenize (| serve). User errors print one line and exit 2.
#include <cstdio>
#include <new>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "nanovllm/dist/socket.h"
#include "nanovllm/utils/error.h"

int main(int argc, char** argv) {
  CLI::App app{"nano-vllm in C++: a fast, readable LLM inference engine"};
  app.require_subcommand(1);
  nanovllm::cli::add_generate(app);
  nanovllm::cli::add_bench(app);
  nanovllm::cli::add_bench_serve(app);
  nanovllm::cli::add_tokenize(app);
  nanovllm::cli::add_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
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
