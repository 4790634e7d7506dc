// The structured-output oracle tests' access to node (tests/node_oracle.h does the running and
// caching): the xgrammar-backed scripts of tests/oracles, and the repository root.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "node_oracle.h"

namespace nanovllm::structured::test {

// Repository root: $NANOVLLM_SOURCE_DIR (set by ctest), else the first parent of the working
// directory holding tests/oracles.
inline std::filesystem::path repo_root() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  for (fs::path p = fs::current_path(); !p.empty() && p != p.parent_path(); p = p.parent_path())
    if (fs::exists(p / "tests/oracles/package.json")) return p;
  return "../..";
}

inline bool xgrammar_installed() {
  return std::filesystem::exists(repo_root() / "tests/oracles/node_modules/@mlc-ai/web-xgrammar");
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// One of the xgrammar-backed scripts of tests/oracles on `request` (json or ordered_json).
template <class Json>
nlohmann::json run_structured_oracle(const std::string& script, const Json& request, std::string* why) {
  Json answer = nanovllm::test::run_node_oracle(repo_root(), script, "@mlc-ai/web-xgrammar", request, why);
  return answer.is_null() ? nlohmann::json() : nlohmann::json::parse(answer.dump());
}

}  // namespace nanovllm::structured::test
