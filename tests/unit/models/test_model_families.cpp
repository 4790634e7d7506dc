// The dense families beside Qwen3 (Qwen2/2.5, Llama 3.x, Mistral): their real config.json files
// parse into the presets' values (and the known parameter counts), each family's defaults and
// sliding-window rules as transformers' config classes have them, and Llama 3's RoPE scaling
// against its formula written out again here.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "config_test_util.h"
#include "nanovllm/config/config.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;
using nlohmann::json;

namespace {

// As downloaded from Hugging Face (keys we do not read left in).
const char* kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
  "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 128256})";

const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
  "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

const char* kQwen25_05B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";

using test::config_error;
using test::parse_config;

void expect_same(const ModelConfig& c, const ModelConfig& p) {
  EXPECT_EQ(c.architecture, p.architecture);
  EXPECT_EQ(c.vocab_size, p.vocab_size);
  EXPECT_EQ(c.hidden_size, p.hidden_size);
  EXPECT_EQ(c.intermediate_size, p.intermediate_size);
  EXPECT_EQ(c.num_hidden_layers, p.num_hidden_layers);
  EXPECT_EQ(c.num_attention_heads, p.num_attention_heads);
  EXPECT_EQ(c.num_key_value_heads, p.num_key_value_heads);
  EXPECT_EQ(c.head_dim, p.head_dim);
  EXPECT_EQ(c.max_position_embeddings, p.max_position_embeddings);
  EXPECT_EQ(c.rms_norm_eps, p.rms_norm_eps);
  EXPECT_EQ(c.rope_theta, p.rope_theta);
  EXPECT_EQ(c.rope_scaling.type, p.rope_scaling.type);
  EXPECT_EQ(c.rope_scaling.factor, p.rope_scaling.factor);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, p.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(c.tie_word_embeddings, p.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, p.bos_token_id);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) EXPECT_EQ(c.layer_window(i), p.layer_window(i)) << i;
}

}  // namespace

TEST(ModelFamilies, RealConfigsMatchPresetsAndParameterCounts) {
  struct Case {
    const char* text;
    const char* preset;
    int64_t params;  // as the model cards / transformers' num_parameters() give them
  };
  for (const Case& k : {Case{kLlama31_8B, "llama-3.1-8b", 8030261248}, Case{kLlama32_1B, "llama-3.2-1b", 1235814400},
                        Case{kQwen25_05B, "qwen2.5-0.5b", 494032768}, Case{kMistral7B, "mistral-7b", 7241732096}}) {
    SCOPED_TRACE(k.preset);
    const ModelConfig c = parse_model_config(k.text, std::string(k.preset) + "/config.json");
    expect_same(c, *preset_model_config(k.preset));
    EXPECT_EQ(c.checked_num_parameters(), k.params);
  }
  const ModelConfig llama = parse_model_config(kLlama31_8B, "c");
  EXPECT_EQ(llama.head_dim, 128);  // no head_dim key: hidden_size / num_attention_heads
  EXPECT_EQ(llama.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_TRUE(llama.rope_scaling.is_llama3());
  EXPECT_EQ(llama.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(llama.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(llama.derived_max_model_len(), 131072);  // llama3 scaling keeps max_position_embeddings
  EXPECT_EQ(parse_model_config(kQwen25_05B, "c").head_dim, 64);
  for (const char* name : {"qwen2.5-7b", "llama-3.1-8b", "mistral-7b", "qwen2.5-0.5b", "llama-3.2-1b"}) {
    const auto names = preset_names();
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

// Mistral: a window in every layer (absent: MistralConfig's 4096; null: none). Qwen2: only with
// use_sliding_window (Qwen2.5's configs carry a window and leave it off). Llama: never.
TEST(ModelFamilies, SlidingWindowAsEachConfigClassHasIt) {
  json m = json::parse(kMistral7B);
  EXPECT_EQ(parse_config(m).layer_window(0), 4096);
  EXPECT_EQ(parse_config(m).layer_window(31), 4096);
  m.erase("sliding_window");
  EXPECT_EQ(parse_config(m).layer_window(5), 4096);
  m["sliding_window"] = nullptr;
  EXPECT_EQ(parse_config(m).layer_window(5), 0);
  EXPECT_EQ(parse_config(m).sliding_window, 0);

  json q = json::parse(kQwen25_05B);
  EXPECT_EQ(parse_config(q).sliding_window, 0);
  q["use_sliding_window"] = true;  // layers 21.. (max_window_layers) get the window
  const ModelConfig qc = parse_config(q);
  EXPECT_EQ(qc.layer_window(20), 0);
  EXPECT_EQ(qc.layer_window(21), 32768);
  EXPECT_EQ(qc.layer_window(23), 32768);

  json l = json::parse(kLlama31_8B);
  l["sliding_window"] = 16;
  l["use_sliding_window"] = true;
  EXPECT_EQ(parse_config(l).sliding_window, 0);
}

TEST(ModelFamilies, DefaultsAndRefusals) {
  json q = json::parse(kQwen25_05B);
  q["attention_bias"] = true;  // Qwen2's q/k/v biases are the architecture's; transformers ignores the key
  EXPECT_EQ(config_error(q), "");
  json l = json::parse(kLlama31_8B);
  l["attention_bias"] = true;
  EXPECT_NE(
      config_error(l).find("'attention_bias' is true (biases in the q/k/v/o projections), which is not implemented"),
      std::string::npos)
      << config_error(l);
  l = json::parse(kLlama31_8B);
  l["model_type"] = "mistral";
  EXPECT_NE(config_error(l).find("'model_type' is 'mistral', which does not match the architecture LlamaForCausalLM"),
            std::string::npos);
  l = json::parse(kLlama31_8B);
  l.erase("model_type");  // absent: the architecture's
  EXPECT_EQ(config_error(l), "");
  l["num_attention_heads"] = 24;  // 4096 / 24 is not whole, and no head_dim is given
  l["num_key_value_heads"] = 8;
  EXPECT_NE(config_error(l).find("'hidden_size' (4096) is not a multiple of num_attention_heads (24)"),
            std::string::npos)
      << config_error(l);
  l["head_dim"] = 128;
  EXPECT_EQ(config_error(l), "");
  l = json::parse(kLlama31_8B);
  l["rope_scaling"].erase("low_freq_factor");
  EXPECT_NE(config_error(l).find("'rope_scaling': 'low_freq_factor' is missing"), std::string::npos) << config_error(l);
  l = json::parse(kLlama31_8B);
  l["rope_scaling"]["high_freq_factor"] = 1.0;
  EXPECT_NE(config_error(l).find("'high_freq_factor' (1.0) must be above low_freq_factor (1.0)"), std::string::npos)
      << config_error(l);
  json x = json::parse(kMistral7B);
  x["architectures"] = {"Qwen2MoeForCausalLM"};
  EXPECT_NE(config_error(x).find("unsupported architecture 'Qwen2MoeForCausalLM'; supported: Qwen3ForCausalLM, "
                                 "Qwen3MoeForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM"),
            std::string::npos)
      << config_error(x);
}

// Llama 3.1 (head_dim 128, theta 5e5, factor 8, original 8192): pair i of wavelength
// 2 pi 5e5^(i/64) is kept below 8192 / 4 = 2048 tokens (i <= 28), divided by 8 above 8192
// (i >= 35), and in between weighted by s = (8192 / wavelength - 1) / (4 - 1) on the kept value.
TEST(ModelFamilies, Llama3RopeFollowsTheFormula) {
  const ModelConfig c = parse_model_config(kLlama31_8B, "c");
  const RopeParams p = rotary_embedding(c);
  const RopeParams plain = RopeParams::plain(128, 500000);
  ASSERT_EQ(p.inv_freq.size(), 64u);
  EXPECT_EQ(p.attention_scaling, 1.0f);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < 64; ++i) {
    const double f = std::pow(500000.0, -double(i) / 64), wavelen = 2 * std::numbers::pi / f;
    double want;
    if (wavelen < 2048) {
      want = f, ++kept;
      EXPECT_EQ(p.inv_freq[i], plain.inv_freq[i]) << i;
    } else if (wavelen > 8192) {
      want = f / 8, ++divided;
    } else {
      const double s = (8192 / wavelen - 1) / 3;
      want = f * ((1 - s) / 8 + s), ++blended;
      EXPECT_GT(want, f / 8);
      EXPECT_LT(want, f);
    }
    EXPECT_NEAR(p.inv_freq[i], want, 3e-7 * want) << "pair " << i;
  }
  EXPECT_EQ(kept, 29);
  EXPECT_EQ(divided, 29);
  EXPECT_EQ(blended, 6);
}
