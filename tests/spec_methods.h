// What the speculative-decoding tests over several model families share (CPU and CUDA): a prompt
// that repeats itself (n-gram drafts find matches), an EAGLE-3 head written for a target's shapes,
// and the speculative configs of every method for a target (EAGLE-3 where the target has the three
// layers a head fuses).
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "eagle3_checkpoint_writer.h"
#include "nanovllm/config/config.h"
#include "tiny_engine.h"

namespace nanovllm::test {

// A random segment of `period` ids in [3, 3 + range), `times` times over.
inline std::vector<int32_t> repeating_prompt(size_t period, size_t times, uint32_t seed, int32_t range) {
  std::vector<int32_t> unit = random_tokens(period, seed), p;
  for (auto& x : unit) x = 3 + x % range;
  for (size_t i = 0; i < times; ++i) p.insert(p.end(), unit.begin(), unit.end());
  return p;
}

// The id range of the families' prompts: within the vocabulary, never bos or eos.
inline int32_t prompt_range(const ModelConfig& mc) { return int32_t(std::min<int64_t>(mc.vocab_size, 700) - 4); }

// Writes a random EAGLE-3 head shaped for mc into dir.
inline void write_eagle3_head_for(const std::string& dir, const ModelConfig& mc) {
  Eagle3HeadSpec spec;
  spec.hidden = mc.hidden_size;
  spec.heads = mc.num_attention_heads;
  spec.kv_heads = mc.num_key_value_heads;
  spec.head_dim = mc.head_dim;
  spec.vocab = mc.vocab_size;
  spec.draft_vocab = mc.vocab_size / 2;
  write_eagle3_head(dir, spec);
}

// (name, --speculative-config) of n-gram, the target as its own draft model and the EAGLE-3 head in
// head_dir, k = 3. EAGLE-3 fuses three distinct layers' hidden states: left out below 3 layers.
inline std::vector<std::pair<std::string, std::string>> speculative_methods(const std::string& model_dir,
                                                                            const ModelConfig& mc,
                                                                            const std::string& head_dir) {
  std::vector<std::pair<std::string, std::string>> m = {
      {"ngram", R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1})"},
      {"draft_model", R"({"model": ")" + model_dir + R"(", "num_speculative_tokens": 3})"}};
  if (mc.num_hidden_layers >= 3)
    m.push_back({"eagle3", R"({"method": "eagle3", "model": ")" + head_dir + R"(", "num_speculative_tokens": 3})"});
  return m;
}

}  // namespace nanovllm::test
