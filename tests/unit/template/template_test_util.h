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

// Repository root: $NANOVLLM_SOURCE_DIR (set by ctest), else derived from this file's path.
inline std::filesystem::path source_dir() {
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
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
