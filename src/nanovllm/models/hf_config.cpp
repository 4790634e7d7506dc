// ModelConfig from a Hugging Face config.json (+ generation_config.json). Every key we read has
// its JSON type and its range checked, and an error names the file and the key: a broken or
// hostile config fails here in one clear line, not later as a bad_alloc, an int64 overflow or a
// nlohmann type_error. Features we do not implement (o_proj/MLP biases, RoPE scaling other than
// YaRN and llama3, other activations, quantized weights) are refused rather than ignored, since
// ignoring them would give wrong logits without a word. Defaults are those of transformers' config
// class of the architecture (Qwen3Config, Qwen2Config, LlamaConfig, MistralConfig, Qwen3MoeConfig).
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nanovllm/models/fp8_checkpoint.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/int_config.h"
#include "nanovllm/utils/checked_math.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"
#include "nanovllm/utils/json_depth.h"

namespace nanovllm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Far above any real model (Llama-3.1-405B: hidden 16384, intermediate 53248, 126 layers, 128
// heads; Gemma 3: vocabulary 262144), far below what overflows int64 in products of sizes.
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxHidden = int64_t(1) << 20;
constexpr int64_t kMaxIntermediate = int64_t(1) << 22;
constexpr int64_t kMaxLayers = int64_t(1) << 12;
constexpr int64_t kMaxHeads = int64_t(1) << 12;
constexpr int64_t kMaxHeadDim = int64_t(1) << 12;
constexpr int64_t kMaxPositions = INT32_MAX;  // positions are int32 on the device
constexpr int64_t kMaxExperts = int64_t(1) << 12;
constexpr int64_t kMaxParameters = int64_t(1) << 40;

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

std::optional<int64_t> as_int64(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u > uint64_t(INT64_MAX) ? std::nullopt : std::optional<int64_t>(int64_t(u));
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// Typed, bounded access to the keys of one JSON object; errors name `where` and the key. A key
// whose value is null counts as absent, as in transformers.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }
  bool present(const char* key) const { return j_.contains(key); }  // even if null
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw LoadError(where_ + ": '" + key + "' " + what);
  }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const json* v = find(key);
    if (!v) fail(key, "is missing (an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "])");
    return integer_value(key, *v, lo, hi);
  }
  int64_t integer_or(const char* key, int64_t lo, int64_t hi, int64_t def) const {
    return has(key) ? integer(key, lo, hi) : def;
  }
  int64_t integer_value(const std::string& key, const json& v, int64_t lo, int64_t hi) const {
    const auto i = as_int64(v);
    if (!i || *i < lo || *i > hi)
      fail(key,
           "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " + shown(v) + ")");
    return *i;
  }
  // A finite number in (lo, hi].
  double number_or(const char* key, double lo, double hi, double def) const {
    const json* v = find(key);
    if (!v) return def;
    const double x = v->is_number() ? v->get<double>() : NAN;
    if (!std::isfinite(x) || !(x > lo) || x > hi)
      fail(key, "must be a number in (" + json(lo).dump() + ", " + json(hi).dump() + "] (got " + shown(*v) + ")");
    return x;
  }
  bool boolean_or(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) fail(key, "must be true or false (got " + shown(*v) + ")");
    return v->get<bool>();
  }
  std::string string_or(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_string()) fail(key, "must be a string (got " + shown(*v) + ")");
    return v->get<std::string>();
  }
  const json* object(const char* key) const {
    const json* v = find(key);
    if (v && !v->is_object()) fail(key, "must be an object (got " + shown(*v) + ")");
    return v;
  }

  // A token id or a list of them (eos_token_id), each inside the vocabulary.
  std::vector<int32_t> token_ids(const char* key, int64_t vocab) const {
    std::vector<int32_t> ids;
    const json* v = find(key);
    if (!v) return ids;
    if (!v->is_array()) return {int32_t(integer_value(key, *v, 0, vocab - 1))};
    for (size_t i = 0; i < v->size(); ++i)
      ids.push_back(int32_t(integer_value(std::string(key) + "[" + std::to_string(i) + "]", (*v)[i], 0, vocab - 1)));
    return ids;
  }

 private:
  const json& j_;
  std::string where_;
};

json parse_object(const std::string& text, const std::string& where) {
  if (const size_t deep = find_json_too_deep(text); deep != std::string::npos)
    throw LoadError(where + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at byte offset " +
                    std::to_string(deep) + ")");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw LoadError(where + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) throw LoadError(where + ": not a JSON object");
  return j;
}

std::string architecture_of(const Reader& r) {
  std::string arch;
  if (const json* a = r.find("architectures")) {
    if (!a->is_array() || a->size() != 1 || !(*a)[0].is_string())
      r.fail("architectures", "must be a list of one architecture name (got " + shown(*a) + ")");
    arch = (*a)[0].get<std::string>();
  }
  if (arch.empty()) arch = "Qwen3ForCausalLM";  // (the default of ModelConfig)
  // A sequence-classification checkpoint is its family's decoder with a score head (pooling_model.h).
  const std::string kSeqCls = "ForSequenceClassification";
  if (arch.size() > kSeqCls.size() && arch.ends_with(kSeqCls))
    arch = arch.substr(0, arch.size() - kSeqCls.size()) + "ForCausalLM";
  const std::string expected_type = model_type_of(arch);
  if (expected_type.empty()) {
    std::string list;
    for (auto& s : supported_architectures()) list += (list.empty() ? "" : ", ") + s;
    throw LoadError(r.where() + ": unsupported architecture '" + arch + "'; supported: " + list);
  }
  const std::string type = r.string_or("model_type", expected_type);
  if (type != expected_type) r.fail("model_type", "is '" + type + "', which does not match the architecture " + arch);
  return arch;
}

// YaRN's fields, as transformers 5.17 reads them (_compute_yarn_parameters and
// standardize_rope_params): factor (null: max_position_embeddings / original), the pre-training
// length original_max_position_embeddings (a top-level key wins; absent: max_position_embeddings),
// attention_factor or mscale / mscale_all_dim, beta_fast / beta_slow (0 or absent: 32 / 1) and
// truncate. transformers only warns about the nonsense cases refused here.
void read_yarn(const Reader& r, const Reader& sub, ModelConfig& c) {
  RopeScaling& y = c.rope_scaling;
  y.type = "yarn";
  if (!(c.rope_theta > 1))
    throw LoadError(r.where() + ": YaRN needs a rope_theta above 1 (got " + json(c.rope_theta).dump() + ")");
  if (r.has("original_max_position_embeddings"))
    y.original_max_position_embeddings = r.integer("original_max_position_embeddings", 1, kMaxPositions);
  else
    y.original_max_position_embeddings =
        sub.integer_or("original_max_position_embeddings", 1, kMaxPositions, c.max_position_embeddings);
  if (!sub.present("factor")) sub.fail("factor", "is missing (YaRN's context extension, a number >= 1)");
  y.factor =
      sub.number_or("factor", 0, 1e6, double(c.max_position_embeddings) / double(y.original_max_position_embeddings));
  if (y.factor < 1)  // transformers warns; below 1 YaRN would shrink the context (and tiny ones overflow)
    sub.fail("factor", "is " + json(y.factor).dump() + ", below 1: YaRN's factor extends the context" +
                           (sub.has("factor") ? "" : " (max_position_embeddings / original_max_position_embeddings)"));
  if (sub.has("attention_factor")) y.attention_factor = sub.number_or("attention_factor", 0, 1e3, 1);
  // 0 means "not given" for these, as transformers' `or` and truthiness read them.
  auto zero_or_positive = [&](const char* key, double def) {
    const json* v = sub.find(key);
    if (!v) return def;
    const double x = v->is_number() ? v->get<double>() : NAN;
    if (!(x >= 0 && x <= 1e6)) sub.fail(key, "must be a number in [0, 1e6] (got " + shown(*v) + ")");
    return x > 0 ? x : def;
  };
  y.beta_fast = zero_or_positive("beta_fast", 32);
  y.beta_slow = zero_or_positive("beta_slow", 1);
  if (y.beta_fast < y.beta_slow)
    sub.fail("beta_fast", "(" + json(y.beta_fast).dump() + ") is below beta_slow (" + json(y.beta_slow).dump() +
                              "): the interpolation ramp would run backwards");
  y.mscale = zero_or_positive("mscale", 0);
  y.mscale_all_dim = zero_or_positive("mscale_all_dim", 0);
  y.truncate = sub.boolean_or("truncate", true);
}

// Llama 3's RoPE scaling (transformers' _compute_llama3_parameters; _validate_llama3_parameters
// requires every key): factor, low_freq_factor, high_freq_factor, original_max_position_embeddings.
void read_llama3(const Reader& sub, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  s.type = "llama3";
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    if (!sub.has(key))
      sub.fail(key,
               "is missing (rope_type llama3 needs factor, low_freq_factor, high_freq_factor "
               "and original_max_position_embeddings)");
  s.factor = sub.number_or("factor", 0, 1e6, 1);
  if (s.factor < 1) sub.fail("factor", "is " + json(s.factor).dump() + ", below 1");
  s.low_freq_factor = sub.number_or("low_freq_factor", 0, 1e6, 1);
  s.high_freq_factor = sub.number_or("high_freq_factor", 0, 1e6, 4);
  if (!(s.high_freq_factor > s.low_freq_factor))
    sub.fail("high_freq_factor", "(" + json(s.high_freq_factor).dump() + ") must be above low_freq_factor (" +
                                     json(s.low_freq_factor).dump() + ")");
  s.original_max_position_embeddings = sub.integer("original_max_position_embeddings", 1, kMaxPositions);
}

// RoPE: rope_theta and the RoPE dictionary, which is `rope_scaling` (config.json of transformers 4,
// and Qwen3's YaRN recipe) or `rope_parameters` (transformers 5). As transformers 5's
// convert_rope_params_to_dict: a non-empty rope_scaling replaces rope_parameters, and rope_theta
// comes from the dictionary, else the top level, else 10000. Default RoPE, YaRN and llama3 are
// implemented; every other type (linear, dynamic, longrope, ...) is refused by name.
void read_rope(const Reader& r, ModelConfig& c) {
  c.rope_theta = r.number_or("rope_theta", 0, 1e12, 10000.0);
  const json* scaling = r.object("rope_scaling");
  const json* params = r.object("rope_parameters");
  const bool use_scaling = scaling && !scaling->empty();
  if (const json* rope = use_scaling ? scaling : params) {
    const std::string key = use_scaling ? "rope_scaling" : "rope_parameters";
    const Reader sub(*rope, r.where() + ": '" + key + "'");
    const std::string type = sub.string_or("rope_type", sub.string_or("type", "default"));
    c.rope_theta = sub.number_or("rope_theta", 0, 1e12, c.rope_theta);
    if (sub.has("partial_rotary_factor") && sub.number_or("partial_rotary_factor", 0, 1, 1) != 1)
      r.fail(key, "has a partial_rotary_factor below 1, which is not implemented");
    if (type == "yarn")
      read_yarn(r, sub, c);
    else if (type == "llama3")
      read_llama3(sub, c);
    else if (type != "default")
      r.fail(key, "has RoPE type '" + type + "', which is not implemented (the default RoPE, yarn and llama3 are)");
  }
  if (r.has("partial_rotary_factor") && r.number_or("partial_rotary_factor", 0, 1, 1) != 1)
    r.fail("partial_rotary_factor", "below 1 is not implemented");
}

// Sliding-window attention, as transformers decides it. Qwen2/Qwen3Config: the window exists only
// with use_sliding_window (absent: 4096, null: none), and applies to the layers that layer_types
// marks (or, without layer_types, to layers >= max_window_layers). MistralConfig: sliding_window
// (absent: 4096, null: none) applies to every layer. Qwen3MoeConfig: with use_sliding_window, every
// layer (Qwen3MoeAttention reads config.sliding_window alone). LlamaConfig has no window.
void read_sliding_window(const Reader& r, ModelConfig& c) {
  if (c.architecture == "LlamaForCausalLM") return;
  const bool use = c.architecture == "MistralForCausalLM" || r.boolean_or("use_sliding_window", false);
  const bool mistral = c.architecture == "MistralForCausalLM" || c.architecture == "Qwen3MoeForCausalLM";
  const int64_t window = !r.present("sliding_window") ? 4096 : r.integer_or("sliding_window", 1, kMaxPositions, 0);
  const int64_t from = r.integer_or("max_window_layers", 0, INT32_MAX, 28);
  std::vector<bool> sliding(size_t(c.num_hidden_layers), mistral);
  if (const json* types = r.find("layer_types")) {
    // (Its length is not checked: a config with more layers than its weights fails on the first
    // missing tensor, which says more; layers past its end are full attention.)
    if (!types->is_array()) r.fail("layer_types", "must be a list of layer types (got " + shown(*types) + ")");
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (t != "sliding_attention" && t != "full_attention")
        r.fail("layer_types", "entry " + std::to_string(i) + " is " + shown(t) +
                                  ", which is not implemented (full_attention or sliding_attention)");
      if (!mistral && i < sliding.size()) sliding[i] = t == "sliding_attention";  // (MistralModel ignores it)
    }
  } else if (!mistral) {
    for (int64_t i = from; i < c.num_hidden_layers; ++i) sliding[size_t(i)] = true;
  }
  const bool any = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  c.sliding_window = use && any ? window : 0;
  if (c.sliding_window > 0) c.sliding_layers = std::move(sliding);
}

// Qwen3MoeConfig's experts (num_experts, alias num_local_experts in transformers 5's attribute_map),
// top-k routing and which layers are sparse. router_aux_loss_coef and output_router_logits only
// matter in training; shared experts (Qwen2-MoE) are another architecture, refused by name.
void read_moe(const Reader& r, ModelConfig& c) {
  if (c.architecture != "Qwen3MoeForCausalLM") return;
  const char* experts_key = r.has("num_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = r.integer_or(experts_key, 1, kMaxExperts, 128);
  if (r.has("num_experts") && r.has("num_local_experts") &&
      r.integer("num_local_experts", 1, kMaxExperts) != c.num_experts)
    r.fail("num_local_experts", "differs from num_experts (" + std::to_string(c.num_experts) + ")");
  c.num_experts_per_tok = r.integer_or("num_experts_per_tok", 1, c.num_experts, std::min<int64_t>(8, c.num_experts));
  c.moe_intermediate_size = r.integer_or("moe_intermediate_size", 1, kMaxIntermediate, 768);
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", false);
  c.decoder_sparse_step = r.integer_or("decoder_sparse_step", 1, kMaxLayers, 1);
  if (const json* only = r.find("mlp_only_layers")) {
    if (!only->is_array()) r.fail("mlp_only_layers", "must be a list of layer indices (got " + shown(*only) + ")");
    for (size_t i = 0; i < only->size(); ++i)
      c.mlp_only_layers.push_back(
          r.integer_value("mlp_only_layers[" + std::to_string(i) + "]", (*only)[i], 0, c.num_hidden_layers - 1));
  }
  if (const json* shared = r.find("shared_expert_intermediate_size"); shared && *shared != 0)
    r.fail("shared_expert_intermediate_size", "is set: shared experts are not implemented (Qwen3-MoE has none)");
}

// What pooling reads from config.json: the declared class (a *ForSequenceClassification one has
// num_labels, from id2label as transformers counts them, 2 when neither is given) and Matryoshka.
void read_pooling(const Reader& r, ModelConfig& c) {
  if (const json* a = r.find("architectures"); a && a->is_array() && a->size() == 1 && (*a)[0].is_string())
    c.declared_architecture = (*a)[0].get<std::string>();
  if (c.declared_architecture.ends_with("ForSequenceClassification")) {
    const json* labels = r.find("id2label");
    const int64_t from_labels = labels && labels->is_object() ? int64_t(labels->size()) : 2;
    c.num_labels = r.integer_or("num_labels", 1, 1 << 20, from_labels);
  }
  c.is_matryoshka = r.boolean_or("is_matryoshka", false);
  if (const json* dims = r.find("matryoshka_dimensions"); dims && !dims->is_null()) {
    if (!dims->is_array()) r.fail("matryoshka_dimensions", "must be a list of sizes (got " + shown(*dims) + ")");
    for (size_t i = 0; i < dims->size(); ++i)
      c.matryoshka_dimensions.push_back(
          r.integer_value("matryoshka_dimensions[" + std::to_string(i) + "]", (*dims)[i], 1, kMaxHidden));
    c.is_matryoshka = true;
  }
}

// Qwen2's q/k/v biases are part of the architecture (transformers ignores attention_bias there);
// elsewhere attention_bias adds an o_proj bias too, which is not implemented.
void refuse_unimplemented(const Reader& r, const std::string& architecture) {
  if (architecture != "Qwen2ForCausalLM" && r.boolean_or("attention_bias", false))
    r.fail("attention_bias", "is true (biases in the q/k/v/o projections), which is not implemented");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "is true (biases in the MLP), which is not implemented");
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", "is '" + act + "', which is not implemented (only silu)");
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where);
  const Reader r(j, where);
  ModelConfig c;
  c.architecture = architecture_of(r);
  read_pooling(r, c);
  c.vocab_size = r.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = r.integer("hidden_size", 1, kMaxHidden);
  c.intermediate_size = r.integer("intermediate_size", 1, kMaxIntermediate);
  c.num_hidden_layers = r.integer("num_hidden_layers", 1, kMaxLayers);
  c.num_attention_heads = r.integer("num_attention_heads", 1, kMaxHeads);
  c.num_key_value_heads = r.integer_or("num_key_value_heads", 1, c.num_attention_heads, c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw LoadError(where + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                    ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  // transformers' Qwen3Config defaults head_dim to 128; the others to hidden_size / num_attention_heads.
  if (c.architecture == "Qwen3ForCausalLM" || r.has("head_dim")) {
    c.head_dim = r.integer_or("head_dim", 2, kMaxHeadDim, 128);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("hidden_size", "(" + std::to_string(c.hidden_size) + ") is not a multiple of num_attention_heads (" +
                                std::to_string(c.num_attention_heads) + ") and head_dim is not given");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) throw LoadError(where + ": head_dim must be even for rotary embeddings");
  c.max_position_embeddings = r.integer("max_position_embeddings", 1, kMaxPositions);
  c.rms_norm_eps = r.number_or("rms_norm_eps", 0, 1, 1e-6);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.torch_dtype = r.string_or("torch_dtype", r.string_or("dtype", c.torch_dtype));
  read_rope(r, c);
  read_sliding_window(r, c);
  read_moe(r, c);
  refuse_unimplemented(r, c.architecture);
  if (const json* q = r.find("quantization_config"))
    c.checkpoint_quantization = parse_quantization_config(*q, r.where() + ": 'quantization_config'", c.int_checkpoint);
  c.eos_token_ids = r.token_ids("eos_token_id", c.vocab_size);
  if (r.has("bos_token_id")) c.bos_token_id = int32_t(r.integer("bos_token_id", 0, c.vocab_size - 1));
  const auto params = c.checked_num_parameters();
  if (!params || *params > kMaxParameters)
    throw LoadError(where + ": the sizes give " + (params ? std::to_string(*params) : "more than 2^63") +
                    " parameters, more than the 2^40 accepted (hidden_size " + std::to_string(c.hidden_size) +
                    ", intermediate_size " + std::to_string(c.intermediate_size) + ", num_hidden_layers " +
                    std::to_string(c.num_hidden_layers) + ", vocab_size " + std::to_string(c.vocab_size) + ")");
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::string presets;
    for (auto& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
    throw LoadError("model directory '" + dir + "' does not exist (built-in presets: " + presets + ")");
  }
  const fs::path cfg = fs::path(dir) / "config.json";
  if (!fs::exists(cfg, ec) && !fs::is_symlink(cfg, ec)) throw LoadError(cfg.string() + ": missing config.json");
  ModelConfig c = parse_model_config(read_regular_file(cfg.string(), kMaxModelJsonBytes), cfg.string());
  const fs::path gen = fs::path(dir) / "generation_config.json";
  if (fs::exists(gen, ec) || fs::is_symlink(gen, ec)) {
    const json g = parse_object(read_regular_file(gen.string(), kMaxModelJsonBytes), gen.string());
    auto ids = Reader(g, gen.string()).token_ids("eos_token_id", c.vocab_size);
    if (!ids.empty()) c.eos_token_ids = ids;  // generation_config.json wins
  }
  // AutoGPTQ and AutoAWQ describe their checkpoints in quantize_config.json (config.json's
  // quantization_config, where both exist, is the one transformers and vLLM read).
  const fs::path qc = fs::path(dir) / "quantize_config.json";
  if (c.checkpoint_quantization == Quantization::None && (fs::exists(qc, ec) || fs::is_symlink(qc, ec))) {
    const json q = parse_object(read_regular_file(qc.string(), kMaxModelJsonBytes), qc.string());
    c.int_checkpoint = parse_quantize_config_file(q, qc.string());
    c.checkpoint_quantization = c.int_checkpoint.method;
  }
  return c;
}

}  // namespace nanovllm
