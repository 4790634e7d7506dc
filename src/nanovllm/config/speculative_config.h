// vLLM's --speculative-config (a JSON object; Python LLM(speculative_config=dict)): which drafter
// proposes tokens for the target model to verify, and how many per step. One setting of the table
// (settings_table.cpp); the engine builds its drafter from it (spec/drafter.h).
// Methods: "ngram" (prompt lookup: the longest suffix of the sequence's tokens, between
// prompt_lookup_min and prompt_lookup_max tokens long, that occurred before proposes the tokens that
// followed it) and "draft_model" ("model": a smaller model of the same vocabulary proposes by
// decoding; vLLM's "model" without a method means it too) and "eagle3" ("model": an EAGLE-3 head's
// directory, engine/eagle3_drafter.h; none with --load-format dummy: a random head shaped for the
// target). "eagle" and vLLM's other methods are refused by name (not implemented yet), as are
// unknown keys.
// disable_by_batch_size (vLLM's key, >= 2): no row speculates in a step whose running batch holds
// more sequences than this (at large batch a step is compute-bound and drafts cost more than
// they save).
// backoff (ours, default true): rows whose drafts keep being rejected stop drafting for a while.
// draft_tensor_parallel_size (vLLM's key): 1 only. Under tensor parallelism a draft model or EAGLE-3
// head runs un-sharded on rank 0 (engine/llm_engine.h); a sharded drafter is refused by name.
#pragma once
#include <cstdint>
#include <string>

namespace nanovllm {

struct SpeculativeConfig {
  std::string method;  // empty: speculation off
  int64_t num_speculative_tokens = 0;
  // ngram: vLLM's defaults, 5 and 5 when neither is given, the other's value when one is.
  int64_t prompt_lookup_min = 0, prompt_lookup_max = 0;
  std::string model;                  // draft_model: the draft's directory (or Hugging Face id); eagle3: the head's
  int64_t disable_by_batch_size = 0;  // 0: speculate at any batch size
  // Ours, not vLLM's: rows whose drafts keep being rejected stop drafting for a while
  // (spec/draft_backoff.h); false: every decoding row drafts every step, as vLLM does.
  bool backoff = true;

  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  // `text`: a JSON object (an empty text or `{}`/null: off); unknown keys, methods and bad values
  // throw UserError naming `flag` and the key.
  static SpeculativeConfig parse(const std::string& text, const std::string& flag);
  std::string to_json() const;  // "" when off, else every field, compact
};

}  // namespace nanovllm
