// Tokenizer::from_dir: reads tokenizer.json (required), tokenizer_config.json and chat_template.jinja (optional) and
// turns every I/O or JSON problem into a TokenizerError that names the file.
#include <filesystem>

#include "nanovllm/tokenizer/hf_tokenizer.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"
#include "nanovllm/utils/json_depth.h"

namespace nanovllm {
namespace {

nlohmann::json parse(const std::string& text, const std::string& what) {
  if (const size_t at = find_json_too_deep(text); at != std::string::npos)
    throw TokenizerError(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels (at byte offset " + std::to_string(at) + ")");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(what + ": malformed JSON: " + e.what());
  }
}

// The file in one read of its known size (an ostringstream copy of Qwen3's 11 MB tokenizer.json
// took ~40 ms of the start-up); a FIFO, device or directory is refused, as for model files.
std::string read_file(const std::filesystem::path& path) {
  try {
    return read_regular_file(path.string(), size_t(1) << 30);
  } catch (const LoadError& e) {
    throw TokenizerError(e.what());
  }
}

// Re-throws any error of building the tokenizer with the file name in front.
std::unique_ptr<Tokenizer> build(const nlohmann::json& tok, const nlohmann::json& cfg, const std::string& name) {
  if (!tok.is_object()) throw TokenizerError(name + ": top level is not a JSON object");
  try {
    return std::make_unique<HfTokenizer>(tok, cfg);
  } catch (const TokenizerError&) {
    throw;
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(name + ": unexpected JSON shape: " + e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path tok_path = fs::path(dir) / "tokenizer.json";
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(tok_path, ec))
    throw TokenizerError(tok_path.string() + ": file not found (a Hugging Face tokenizer.json is required)");
  const nlohmann::json tok = parse(read_file(tok_path), tok_path.string());
  nlohmann::json cfg;
  if (fs::is_regular_file(cfg_path, ec)) cfg = parse(read_file(cfg_path), cfg_path.string());
  // Newer checkpoints ship the chat template beside the tokenizer instead of inside its config
  // (as transformers, the config's own chat_template wins).
  const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (!(cfg.is_object() && cfg.contains("chat_template")) && fs::is_regular_file(jinja_path, ec)) {
    if (!cfg.is_object()) cfg = nlohmann::json::object();
    cfg["chat_template"] = read_file(jinja_path);
  }
  try {
    return build(tok, cfg, tok_path.string());
  } catch (const TokenizerError& e) {
    const std::string msg = e.what();
    // Component errors say "tokenizer.json: ..."; give the full path instead.
    if (msg.rfind("tokenizer.json: ", 0) == 0) throw TokenizerError(tok_path.string() + msg.substr(14));
    throw;
  }
}

std::unique_ptr<Tokenizer> tokenizer_from_json(const std::string& tokenizer_json, const std::string& config_json) {
  const nlohmann::json tok = parse(tokenizer_json, "tokenizer.json");
  const nlohmann::json cfg = config_json.empty() ? nlohmann::json() : parse(config_json, "tokenizer_config.json");
  return build(tok, cfg, "tokenizer.json");
}

}  // namespace nanovllm
