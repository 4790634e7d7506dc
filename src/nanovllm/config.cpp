#include "nanovllm/config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace fs = std::filesystem;
using nlohmann::json;

static std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw LoadError(p.string() + ": cannot read file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static std::vector<int32_t> ids_of(const json& v) {
  std::vector<int32_t> out;
  if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  else if (v.is_array())
    for (auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int32_t>());
  return out;
}

std::vector<std::string> ModelConfig::supported_architectures() { return {"Qwen3ForCausalLM"}; }

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw LoadError(where + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) throw LoadError(where + ": not a JSON object");
  ModelConfig c;
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
    arch = j["architectures"][0].get<std::string>();
  auto sup = supported_architectures();
  if (std::find(sup.begin(), sup.end(), arch) == sup.end()) {
    std::string list;
    for (auto& s : sup) list += (list.empty() ? "" : ", ") + s;
    throw LoadError(where + ": unsupported architecture '" + (arch.empty() ? "(none)" : arch) +
                    "'; supported: " + list);
  }
  c.architecture = arch;
  auto req = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      throw LoadError(where + ": missing or invalid positive integer '" + key + "'");
    return j[key].get<int64_t>();
  };
  c.vocab_size = req("vocab_size");
  c.hidden_size = req("hidden_size");
  c.intermediate_size = req("intermediate_size");
  c.num_hidden_layers = req("num_hidden_layers");
  c.num_attention_heads = req("num_attention_heads");
  c.num_key_value_heads = j.contains("num_key_value_heads") ? req("num_key_value_heads") : c.num_attention_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? req("head_dim")
                                                                   : c.hidden_size / c.num_attention_heads;
  c.max_position_embeddings = req("max_position_embeddings");
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.rms_norm_eps = j["rms_norm_eps"].get<double>();
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) c.rope_theta = j["rope_theta"].get<double>();
  // transformers 5.x writes rope_parameters {rope_type, rope_theta} instead of rope_theta.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    auto& rp = j["rope_parameters"];
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) c.rope_theta = rp["rope_theta"].get<double>();
    if (rp.contains("rope_type") && rp["rope_type"] != "default")
      throw LoadError(where + ": rope_type '" + rp["rope_type"].get<std::string>() + "' is not supported (only default)");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw LoadError(where + ": rope_scaling is not supported yet");
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean())
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) c.torch_dtype = j["torch_dtype"].get<std::string>();
  else if (j.contains("dtype") && j["dtype"].is_string()) c.torch_dtype = j["dtype"].get<std::string>();
  if (j.contains("eos_token_id")) c.eos_token_ids = ids_of(j["eos_token_id"]);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_token_id = j["bos_token_id"].get<int32_t>();
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw LoadError(where + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                    ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  if (c.head_dim % 2 != 0) throw LoadError(where + ": head_dim must be even for rotary embeddings");
  return c;
}

ModelConfig ModelConfig::from_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) {
    std::string presets;
    for (auto& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
    throw LoadError("model directory '" + dir + "' does not exist (built-in presets: " + presets + ")");
  }
  fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg)) throw LoadError(cfg.string() + ": missing config.json");
  ModelConfig c = from_json_text(read_file(cfg), cfg.string());
  fs::path gen = fs::path(dir) / "generation_config.json";
  if (fs::exists(gen)) {
    json g;
    try {
      g = json::parse(read_file(gen));
    } catch (const json::exception& e) {
      throw LoadError(gen.string() + ": invalid JSON: " + e.what());
    }
    if (g.contains("eos_token_id")) {
      auto ids = ids_of(g["eos_token_id"]);
      if (!ids.empty()) c.eos_token_ids = ids;
    }
  }
  return c;
}

// The real Qwen3 configs (Hugging Face Qwen/Qwen3-*), so benchmarks need no download.
std::optional<ModelConfig> ModelConfig::preset(const std::string& name) {
  ModelConfig c;
  c.vocab_size = 151936;
  c.head_dim = 128;
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000;
  c.eos_token_ids = {151645, 151643};
  c.bos_token_id = 151643;
  if (name == "qwen3-0.6b") {
    c.hidden_size = 1024; c.intermediate_size = 3072; c.num_hidden_layers = 28;
    c.num_attention_heads = 16; c.num_key_value_heads = 8; c.tie_word_embeddings = true;
  } else if (name == "qwen3-1.7b") {
    c.hidden_size = 2048; c.intermediate_size = 6144; c.num_hidden_layers = 28;
    c.num_attention_heads = 16; c.num_key_value_heads = 8; c.tie_word_embeddings = true;
  } else if (name == "qwen3-8b") {
    c.hidden_size = 4096; c.intermediate_size = 12288; c.num_hidden_layers = 36;
    c.num_attention_heads = 32; c.num_key_value_heads = 8; c.tie_word_embeddings = false;
  } else {
    return std::nullopt;
  }
  return c;
}

std::vector<std::string> ModelConfig::preset_names() { return {"qwen3-0.6b", "qwen3-1.7b", "qwen3-8b"}; }

void EngineConfig::validate() const {
  auto pos = [](const char* name, int64_t v) {
    if (v <= 0) throw UserError(std::string("--") + name + " must be positive (got " + std::to_string(v) + ")");
  };
  pos("max-num-seqs", max_num_seqs);
  pos("max-num-batched-tokens", max_num_batched_tokens);
  pos("max-model-len", max_model_len);
  pos("block-size", block_size);
  pos("tensor-parallel-size", tensor_parallel_size);
  pos("nnodes", nnodes);
  if (tensor_parallel_size % nnodes != 0)
    throw UserError("--nnodes " + std::to_string(nnodes) + " does not divide --tensor-parallel-size " +
                    std::to_string(tensor_parallel_size) + " (every node runs the same number of ranks)");
  if (node_rank < 0 || node_rank >= nnodes)
    throw UserError("--node-rank must be in [0, " + std::to_string(nnodes) + ") (got " + std::to_string(node_rank) + ")");
  if (tp_rank < 0 || tp_rank >= tensor_parallel_size)
    throw UserError("--rank must be in [0, " + std::to_string(tensor_parallel_size) + ") (got " + std::to_string(tp_rank) + ")");
  if (master_port < 0 || master_port > 65535) throw UserError("--master-port must be in [0, 65535]");
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
    throw UserError("--gpu-memory-utilization must be in (0, 1] (got " + std::to_string(gpu_memory_utilization) + ")");
  if (kv_cache_memory < 0) throw UserError("--kv-cache-memory must be >= 0 bytes");
  if (device != "cpu" && device != "cuda" && device != "auto")
    throw UserError("--device must be cpu, cuda or auto (got '" + device + "')");
}

}  // namespace nanovllm
