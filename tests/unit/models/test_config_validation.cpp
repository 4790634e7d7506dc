// config.json and generation_config.json: every key of a wrong type, every absurd size and every
// Qwen3 feature we do not implement is a LoadError naming the file and the key; the real Qwen3
// configs and the fixtures still load.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nanovllm/config/config.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "test_paths.h"

using namespace nanovllm;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json fixture_config() {
  std::ifstream in(test::fixture("tiny-qwen3-tied") + "/config.json");
  return json::parse(in);
}

// The LoadError message of parsing the fixture's config.json with `patch` merged in (a null
// value removes the key), or "" if it parsed.
std::string config_error(const json& patch) {
  json j = fixture_config();
  j.merge_patch(patch);
  try {
    parse_model_config(j.dump(), "m/config.json");
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONFIG_ERROR(patch, part)                                                                   \
  do {                                                                                                     \
    const std::string msg_ = config_error(patch);                                                          \
    EXPECT_NE(msg_.find(part), std::string::npos) << "patch " << (patch).dump() << " -> '" << msg_ << "'"; \
  } while (0)

// The real Qwen/Qwen3-0.6B config.json (Hugging Face, as downloaded).
const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

}  // namespace

TEST(ConfigValidation, RealConfigsLoad) {
  const ModelConfig c = parse_model_config(kQwen3_06B, "qwen3-0.6b/config.json");
  const ModelConfig p = *preset_model_config("qwen3-0.6b");
  EXPECT_EQ(c.vocab_size, p.vocab_size);
  EXPECT_EQ(c.hidden_size, p.hidden_size);
  EXPECT_EQ(c.head_dim, p.head_dim);
  EXPECT_EQ(c.num_key_value_heads, p.num_key_value_heads);
  EXPECT_EQ(c.rope_theta, p.rope_theta);
  EXPECT_EQ(c.tie_word_embeddings, p.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.checked_num_parameters(), 596049920);  // Qwen3-0.6B: 0.6B with the tied embedding
  EXPECT_EQ(config_error(json::object()), "");
  for (const char* name : {"tiny-qwen3-tied", "tiny-qwen3-untied"})
    EXPECT_NO_THROW(load_model_config(test::fixture(name))) << name;
}

// Before: 2^40 or 1e9 reached the allocator ('internal error: std::bad_alloc', exit 1).
TEST(ConfigValidation, AbsurdSizesNameTheKey) {
  EXPECT_CONFIG_ERROR(json({{"hidden_size", int64_t(1) << 40}}),
                      "m/config.json: 'hidden_size' must be an integer in [1, 1048576] (got 1099511627776)");
  EXPECT_CONFIG_ERROR(json({{"num_hidden_layers", 1000000000}}), "'num_hidden_layers' must be an integer in [1, 4096]");
  EXPECT_CONFIG_ERROR(json({{"vocab_size", -5}}), "'vocab_size' must be an integer in [1, 16777216] (got -5)");
  EXPECT_CONFIG_ERROR(json({{"vocab_size", 18446744073709551615ull}}), "'vocab_size' must be an integer");
  EXPECT_CONFIG_ERROR(json({{"num_attention_heads", 0}}),
                      "'num_attention_heads' must be an integer in [1, 4096] (got 0)");
  EXPECT_CONFIG_ERROR(json({{"num_key_value_heads", 0}}), "'num_key_value_heads' must be an integer in [1, 4]");
  EXPECT_CONFIG_ERROR(json({{"num_key_value_heads", 8}}), "'num_key_value_heads' must be an integer in [1, 4] (got 8)");
  EXPECT_CONFIG_ERROR(json({{"num_key_value_heads", 3}}),
                      "num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
  EXPECT_CONFIG_ERROR(json({{"head_dim", int64_t(1) << 40}}), "'head_dim' must be an integer in [2, 4096]");
  EXPECT_CONFIG_ERROR(json({{"head_dim", 33}}), "head_dim must be even");
  EXPECT_CONFIG_ERROR(json({{"intermediate_size", int64_t(1) << 50}}),
                      "'intermediate_size' must be an integer in [1, 4194304]");
  EXPECT_CONFIG_ERROR(json({{"max_position_embeddings", int64_t(1) << 62}}),
                      "'max_position_embeddings' must be an integer in [1, 2147483647]");
  EXPECT_CONFIG_ERROR(json({{"max_position_embeddings", 1.5}}), "'max_position_embeddings' must be an integer");
  EXPECT_CONFIG_ERROR(json({{"vocab_size", nullptr}}), "'vocab_size' is missing");
  // Each within its bound, together more than 2^40 parameters.
  EXPECT_CONFIG_ERROR(json({{"hidden_size", 1 << 20}, {"intermediate_size", 1 << 19}}),
                      "the sizes give 3299882303616 parameters, more than the 2^40 accepted");
}

// Before: rms_norm_eps "x" was silently replaced by the default; a number in "architectures" or
// "rope_type" escaped as nlohmann's type_error ('internal error', exit 1).
TEST(ConfigValidation, WrongTypesNameTheKey) {
  EXPECT_CONFIG_ERROR(json({{"rms_norm_eps", "x"}}), "'rms_norm_eps' must be a number in (0.0, 1.0] (got \"x\")");
  EXPECT_CONFIG_ERROR(json({{"rms_norm_eps", -1}}), "'rms_norm_eps' must be a number in (0.0, 1.0] (got -1)");
  EXPECT_CONFIG_ERROR(json({{"rope_theta", "x"}}), "'rope_theta' must be a number");
  EXPECT_CONFIG_ERROR(json({{"rope_parameters", {{"rope_theta", "x"}}}}),
                      "'rope_parameters': 'rope_theta' must be a number");
  EXPECT_CONFIG_ERROR(json({{"rope_parameters", {{"rope_type", 5}}}}),
                      "'rope_parameters': 'rope_type' must be a string (got 5)");
  EXPECT_CONFIG_ERROR(json({{"rope_parameters", 5}}), "'rope_parameters' must be an object (got 5)");
  EXPECT_CONFIG_ERROR(json({{"architectures", {5}}}),
                      "'architectures' must be a list of one architecture name (got [5])");
  EXPECT_CONFIG_ERROR(json({{"architectures", "Qwen3ForCausalLM"}}),
                      "'architectures' must be a list of one architecture name");
  EXPECT_CONFIG_ERROR(json({{"model_type", "llama"}}),
                      "'model_type' is 'llama', which does not match the architecture Qwen3ForCausalLM");
  EXPECT_CONFIG_ERROR(json({{"tie_word_embeddings", "yes"}}),
                      "'tie_word_embeddings' must be true or false (got \"yes\")");
  EXPECT_CONFIG_ERROR(json({{"hidden_act", 5}}), "'hidden_act' must be a string (got 5)");
  EXPECT_CONFIG_ERROR(json({{"torch_dtype", 16}}), "'torch_dtype' must be a string (got 16)");
  EXPECT_CONFIG_ERROR(json({{"eos_token_id", int64_t(1) << 40}}), "'eos_token_id' must be an integer in [0, 511]");
  EXPECT_CONFIG_ERROR(json({{"eos_token_id", {1, "x"}}}),
                      "'eos_token_id[1]' must be an integer in [0, 511] (got \"x\")");
  EXPECT_CONFIG_ERROR(json({{"bos_token_id", -1}}), "'bos_token_id' must be an integer in [0, 511] (got -1)");
  EXPECT_CONFIG_ERROR(json({{"layer_types", "full"}}), "'layer_types' must be a list of layer types");
  EXPECT_CONFIG_ERROR(json({{"sliding_window", "x"}}),
                      "'sliding_window' must be an integer in [1, 2147483647] (got \"x\")");
  EXPECT_CONFIG_ERROR(json({{"use_sliding_window", 1}}), "'use_sliding_window' must be true or false (got 1)");
  EXPECT_CONFIG_ERROR(json({{"max_window_layers", -1}}), "'max_window_layers' must be an integer in [0, 2147483647]");
  EXPECT_CONFIG_ERROR(json({{"layer_types", {"full_attention", "linear_attention"}}}),
                      "'layer_types' entry 1 is \"linear_attention\", which is not implemented");
  try {
    parse_model_config("[1, 2]", "m/config.json");
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_STREQ(e.what(), "m/config.json: not a JSON object");
  }
}

// Before: each of these loaded and ran, giving logits unlike transformers' without a word.
TEST(ConfigValidation, UnimplementedFeaturesAreRefused) {
  EXPECT_CONFIG_ERROR(json({{"attention_bias", true}}),
                      "'attention_bias' is true (biases in the q/k/v/o projections), which is not implemented");
  EXPECT_CONFIG_ERROR(json({{"mlp_bias", true}}), "'mlp_bias' is true");
  EXPECT_CONFIG_ERROR(json({{"hidden_act", "gelu"}}), "'hidden_act' is 'gelu', which is not implemented (only silu)");
  EXPECT_CONFIG_ERROR(json({{"quantization_config", {{"quant_method", "bitsandbytes"}}}}),
                      "quantized checkpoints are not implemented");
  EXPECT_CONFIG_ERROR(
      json({{"rope_scaling", {{"type", "linear"}, {"factor", 4.0}}}}),
      "'rope_scaling' has RoPE type 'linear', which is not implemented (the default RoPE, yarn and llama3 are)");
  EXPECT_CONFIG_ERROR(json({{"rope_parameters", {{"rope_type", "llama3"}}}}),
                      "'rope_parameters': 'factor' is missing (rope_type llama3 needs factor, low_freq_factor");
  EXPECT_CONFIG_ERROR(json({{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}), "RoPE type 'dynamic'");
  EXPECT_CONFIG_ERROR(json({{"rope_parameters", {{"rope_type", "longrope"}}}}), "RoPE type 'longrope'");
  EXPECT_CONFIG_ERROR(
      json({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"partial_rotary_factor", 0.5}}}}),
      "'rope_scaling' has a partial_rotary_factor below 1");
  EXPECT_CONFIG_ERROR(json({{"partial_rotary_factor", 0.5}}), "'partial_rotary_factor' below 1 is not implemented");
  EXPECT_EQ(config_error(json({{"rope_scaling", {{"rope_type", "default"}}}})), "");
  EXPECT_EQ(config_error(json({{"attention_bias", false}, {"hidden_act", "silu"}})), "");
}

// Qwen3's documented way to 131,072 tokens: rope_scaling yarn in config.json. Read as transformers
// 5.17 reads it (defaults, which dictionary wins, where original_max_position_embeddings comes
// from); the engine's length follows vLLM (factor * original, whatever max_position_embeddings says).
TEST(ConfigValidation, YarnIsRead) {
  json j = json::parse(kQwen3_06B);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelConfig c = parse_model_config(j.dump(), "m/config.json");
  EXPECT_TRUE(c.rope_scaling.is_yarn());
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_FALSE(c.rope_scaling.attention_factor.has_value());
  EXPECT_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_TRUE(c.rope_scaling.truncate);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.derived_max_model_len(), 131072);
  EXPECT_EQ(parse_model_config(kQwen3_06B, "m/config.json").derived_max_model_len(), 40960);

  // transformers 5's spelling, every field given; a top-level original_max_position_embeddings wins.
  json k = fixture_config();
  k["rope_parameters"] = {
      {"rope_type", "yarn"},      {"rope_theta", 5e5}, {"factor", 2.5},  {"original_max_position_embeddings", 100},
      {"attention_factor", 1.25}, {"beta_fast", 16},   {"beta_slow", 2}, {"mscale", 0.5},
      {"mscale_all_dim", 1},      {"truncate", false}};
  c = parse_model_config(k.dump(), "m/config.json");
  EXPECT_EQ(c.rope_theta, 5e5);  // the dictionary's rope_theta wins over the top level's
  EXPECT_EQ(c.rope_scaling.factor, 2.5);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 100);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.25);
  EXPECT_EQ(c.rope_scaling.beta_fast, 16);
  EXPECT_EQ(c.rope_scaling.beta_slow, 2);
  EXPECT_EQ(c.rope_scaling.mscale, 0.5);
  EXPECT_EQ(c.rope_scaling.mscale_all_dim, 1);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.derived_max_model_len(), 250);
  k["original_max_position_embeddings"] = 64;
  EXPECT_EQ(parse_model_config(k.dump(), "m/config.json").rope_scaling.original_max_position_embeddings, 64);

  // A non-empty rope_scaling replaces rope_parameters; rope_theta then comes from the top level.
  k = fixture_config();  // rope_parameters {default, 1e6}, rope_theta 1e6
  k["rope_theta"] = 1e4;
  k["rope_scaling"] = {{"type", "yarn"}, {"factor", 2}};  // the old "type" key
  c = parse_model_config(k.dump(), "m/config.json");
  EXPECT_TRUE(c.rope_scaling.is_yarn());
  EXPECT_EQ(c.rope_theta, 1e4);
  // original_max_position_embeddings absent: max_position_embeddings (standardize_rope_params).
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(c.derived_max_model_len(), 2048);
  // factor null: max_position_embeddings / original; 0 for beta_* and mscale*: not given.
  k["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 256},
                       {"beta_fast", 0},      {"beta_slow", 0},    {"mscale", 0}};
  c = parse_model_config(k.dump(), "m/config.json");
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.rope_scaling.mscale, 0);
  // An empty rope_scaling is no rope_scaling (transformers' `rope_scaling or rope_parameters`).
  k["rope_scaling"] = json::object();
  EXPECT_FALSE(parse_model_config(k.dump(), "m/config.json").rope_scaling.is_yarn());
}

TEST(ConfigValidation, YarnFieldsAreChecked) {
  auto yarn = [](json extra) {
    json y = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 256}};
    y.merge_patch(extra);
    return json({{"rope_scaling", y}});
  };
  EXPECT_EQ(config_error(yarn(json::object())), "");
  EXPECT_CONFIG_ERROR(json({{"rope_scaling", {{"rope_type", "yarn"}}}}),
                      "m/config.json: 'rope_scaling': 'factor' is missing (YaRN's context extension, a number >= 1)");
  EXPECT_CONFIG_ERROR(yarn({{"factor", 0}}), "'rope_scaling': 'factor' must be a number in (0.0, 1000000.0] (got 0)");
  EXPECT_CONFIG_ERROR(yarn({{"factor", -2}}), "'factor' must be a number");
  EXPECT_CONFIG_ERROR(yarn({{"factor", "4"}}), "'factor' must be a number in (0.0, 1000000.0] (got \"4\")");
  EXPECT_CONFIG_ERROR(yarn({{"factor", 1e300}}), "'factor' must be a number");
  EXPECT_CONFIG_ERROR(yarn({{"factor", 0.5}}),
                      "'rope_scaling': 'factor' is 0.5, below 1: YaRN's factor extends the context");
  json null_factor = fixture_config();  // factor null (merge_patch would drop it): 1024 / 2048
  null_factor["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 2048}};
  try {
    parse_model_config(null_factor.dump(), "m/config.json");
    ADD_FAILURE() << "accepted an implied factor of 0.5";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("'factor' is 0.5, below 1: YaRN's factor extends the context "
                                         "(max_position_embeddings / original_max_position_embeddings)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(config_error(yarn({{"factor", 1}})), "");
  EXPECT_CONFIG_ERROR(
      yarn({{"original_max_position_embeddings", 0}}),
      "'rope_scaling': 'original_max_position_embeddings' must be an integer in [1, 2147483647] (got 0)");
  EXPECT_CONFIG_ERROR(yarn({{"original_max_position_embeddings", 3.5}}),
                      "'original_max_position_embeddings' must be an integer");
  json top = yarn(json::object());
  top["original_max_position_embeddings"] = -1;
  EXPECT_CONFIG_ERROR(top, "m/config.json: 'original_max_position_embeddings' must be an integer");
  EXPECT_CONFIG_ERROR(yarn({{"attention_factor", 0}}), "'attention_factor' must be a number in (0.0, 1000.0]");
  EXPECT_CONFIG_ERROR(yarn({{"attention_factor", "x"}}), "'attention_factor' must be a number");
  EXPECT_CONFIG_ERROR(yarn({{"beta_fast", -1}}), "'beta_fast' must be a number in [0, 1e6] (got -1)");
  EXPECT_CONFIG_ERROR(yarn({{"beta_slow", "x"}}), "'beta_slow' must be a number");
  EXPECT_CONFIG_ERROR(yarn({{"beta_fast", 1}, {"beta_slow", 2}}),
                      "'beta_fast' (1.0) is below beta_slow (2.0): the interpolation ramp would run backwards");
  EXPECT_CONFIG_ERROR(yarn({{"mscale", -0.5}}), "'mscale' must be a number in [0, 1e6] (got -0.5)");
  EXPECT_CONFIG_ERROR(yarn({{"mscale_all_dim", true}}), "'mscale_all_dim' must be a number");
  EXPECT_CONFIG_ERROR(yarn({{"truncate", 1}}), "'truncate' must be true or false (got 1)");
  EXPECT_CONFIG_ERROR(
      json({{"rope_theta", 1}, {"rope_parameters", nullptr}, {"rope_scaling", yarn(json::object())["rope_scaling"]}}),
      "YaRN needs a rope_theta above 1 (got 1.0)");
}

// --max-model-len as vLLM's _get_and_verify_max_len: unset is the model's length; above it is refused.
TEST(ConfigValidation, MaxModelLenAgainstTheModel) {
  ModelConfig m = *preset_model_config("qwen3-0.6b");
  EngineConfig cfg;
  auto refused = [&](int64_t len) {
    cfg.max_model_len = len;
    try {
      settle_max_model_len(cfg, m);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(settle_max_model_len(cfg, m), 40960);
  cfg.max_model_len = 40960;
  EXPECT_EQ(settle_max_model_len(cfg, m), 40960);
  EXPECT_EQ(refused(40961),
            "--max-model-len 40961 is larger than the model's 40960 (max_position_embeddings in config.json); "
            "positions past it give wrong outputs. Leave --max-model-len unset for the model's length");
  m.rope_scaling.type = "yarn";
  m.rope_scaling.factor = 4;
  m.rope_scaling.original_max_position_embeddings = 32768;
  cfg.max_model_len = 131072;  // past max_position_embeddings (40960), within YaRN's reach
  EXPECT_EQ(settle_max_model_len(cfg, m), 131072);
  cfg.max_model_len = 0;
  EXPECT_EQ(settle_max_model_len(cfg, m), 131072);
  EXPECT_NE(
      refused(131073).find("larger than the model's 131072 (YaRN factor 4 * original_max_position_embeddings 32768)"),
      std::string::npos)
      << refused(131073);
  // A sliding window does not limit the context (the attention kernels apply it).
  m.sliding_window = 4096;
  cfg.max_model_len = 0;
  EXPECT_EQ(settle_max_model_len(cfg, m), 131072);
  cfg.max_model_len = -1;
  EXPECT_THROW(cfg.validate(), UserError);
}

TEST(ConfigValidation, SlidingWindowFollowsTransformers) {
  json j = fixture_config();
  auto window = [&](const json& patch) {
    json k = j;
    k.merge_patch(patch);
    return parse_model_config(k.dump(), "m/config.json").sliding_window;
  };
  EXPECT_EQ(window(json::object()), 0);
  // The window applies to the layers layer_types marks, only with use_sliding_window.
  EXPECT_EQ(window({{"use_sliding_window", true}, {"sliding_window", 16}}), 0);  // all full_attention
  EXPECT_EQ(window({{"use_sliding_window", true},
                    {"sliding_window", 16},
                    {"layer_types", {"full_attention", "sliding_attention"}}}),
            16);
  EXPECT_EQ(window({{"use_sliding_window", false},
                    {"sliding_window", 16},
                    {"layer_types", {"full_attention", "sliding_attention"}}}),
            0);
  // Without layer_types: layers from max_window_layers on (transformers' default 28, absent window 4096).
  EXPECT_EQ(
      window(
          {{"use_sliding_window", true}, {"sliding_window", 16}, {"layer_types", nullptr}, {"max_window_layers", 1}}),
      16);
  EXPECT_EQ(window({{"use_sliding_window", true}, {"sliding_window", 16}, {"layer_types", nullptr}}), 0);
  EXPECT_EQ(window({{"use_sliding_window", true}, {"layer_types", nullptr}, {"max_window_layers", 0}}),
            0);  // null window
  json absent = j;
  absent.erase("sliding_window");
  absent.merge_patch({{"use_sliding_window", true}, {"layer_types", nullptr}, {"max_window_layers", 0}});
  EXPECT_EQ(parse_model_config(absent.dump(), "m/config.json").sliding_window, 4096);

  // Which layers: layer_types, or from max_window_layers on.
  auto layers = [&](const json& patch) {
    json k = j;
    k.merge_patch(patch);
    const ModelConfig c = parse_model_config(k.dump(), "m/config.json");
    std::vector<int64_t> w;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) w.push_back(c.layer_window(i));
    return w;
  };
  EXPECT_EQ(layers({{"use_sliding_window", true},
                    {"sliding_window", 16},
                    {"layer_types", {"sliding_attention", "full_attention"}}}),
            (std::vector<int64_t>{16, 0}));
  EXPECT_EQ(
      layers(
          {{"use_sliding_window", true}, {"sliding_window", 16}, {"layer_types", nullptr}, {"max_window_layers", 1}}),
      (std::vector<int64_t>{0, 16}));
  EXPECT_EQ(
      layers(
          {{"use_sliding_window", false}, {"sliding_window", 16}, {"layer_types", nullptr}, {"max_window_layers", 0}}),
      (std::vector<int64_t>{0, 0}));
}

TEST(ConfigValidation, GenerationConfigIsTypedAndConfigFilesMustBeRegular) {
  const fs::path dir = fs::temp_directory_path() / ("nanovllm_cfg_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(test::fixture("tiny-qwen3-tied") + "/config.json", dir / "config.json");
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": ["1"]})";
  auto error = [&] {
    try {
      load_model_config(dir.string());
    } catch (const LoadError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error().find("generation_config.json: 'eos_token_id[0]' must be an integer in [0, 511] (got \"1\")"),
            std::string::npos)
      << error();
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [7, 8]})";
  EXPECT_EQ(error(), "");
  EXPECT_EQ(load_model_config(dir.string()).eos_token_ids, (std::vector<int32_t>{7, 8}));
  // A FIFO would block the read forever.
  fs::remove(dir / "generation_config.json");
  ASSERT_EQ(::mkfifo((dir / "generation_config.json").c_str(), 0600), 0);
  EXPECT_NE(error().find("generation_config.json: not a regular file (it is a FIFO)"), std::string::npos) << error();
  fs::remove(dir / "config.json");
  ASSERT_EQ(::mkfifo((dir / "config.json").c_str(), 0600), 0);
  EXPECT_NE(error().find("config.json: not a regular file (it is a FIFO)"), std::string::npos) << error();
  fs::remove_all(dir);
}
