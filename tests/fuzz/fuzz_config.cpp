// libFuzzer target for config.json parsing (ModelConfig::from_json_text): any bytes either give
// a config that passes its own checks or throw LoadError/UserError naming the problem; nothing
// crashes, and no other exception escapes (the CLI would exit 1 "internal error" instead of 2).
// A config that loads also gets its rotary embedding table (plain or YaRN) and its context length
// computed, as the engine does next.
// Build and run: scripts/fuzz.sh (seeds in tests/fuzz/corpus/config: the shared Qwen3 configs
// and the fixtures').
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nanovllm/config/config.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nanovllm::ModelConfig c = nanovllm::parse_model_config(text, "config.json");
    const nanovllm::RopeParams rope = nanovllm::rotary_embedding(c);
    if (int64_t(rope.inv_freq.size()) != c.head_dim / 2 || c.derived_max_model_len() < 1) std::abort();
  } catch (const nanovllm::UserError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "config.json: an exception other than UserError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
