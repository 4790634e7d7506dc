// Helpers shared by the chat-template tests: locating fixtures and rendering one-liners.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/chat_template.h"

namespace nanovllm::test {

// Repository root: $NANOVLLM_SOURCE_DIR (set by ctest, but not while gtest_discover_tests lists
// the tests at build time), else derived from this file's path, else the first parent of the
// working directory that holds the chat fixtures (__FILE__ is relative when ccache's base_dir
// rewrote the compile's paths, and the listing runs in build/tests).
inline std::filesystem::path source_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  const fs::path from_file = fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
  if (from_file.is_absolute()) return from_file;
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "tests/fixtures/chat/conversations.json")) return p;
    if (p == p.parent_path()) break;
  }
  return from_file;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Renders `source` with the given extra variables (and no messages).
inline std::string render(const std::string& source, const nlohmann::json& vars = nlohmann::json::object()) {
  ChatTemplateInputs in;
  in.extra = vars;
  return ChatTemplate(source).render(in);
}

}  // namespace nanovllm::test
