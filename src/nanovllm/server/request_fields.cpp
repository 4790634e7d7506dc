#include "nanovllm/server/request_fields.h"

namespace nanovllm::server {

namespace {

enum Ep : unsigned { kChat = 1, kCompletions = 2, kBoth = 3 };

// When an unimplemented field holds its default (null always does: "not set").
using IsDefault = bool (*)(const ojson&);
bool never(const ojson&) { return false; }
bool is_false(const ojson& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_true(const ojson& v) { return v.is_boolean() && v.get<bool>(); }
bool is_zero(const ojson& v) { return v.is_number() && v.get<double>() == 0; }
bool is_one(const ojson& v) { return v.is_number() && v.get<double>() == 1; }

struct FieldRule {
  const char* name;
  unsigned endpoints;
  IsDefault is_default;  // nullptr: implemented here (or by the sampling fields), nothing to check
  const char* why;       // for refused values: what is missing
};

constexpr const char* kNoStructuralTag = "structural tags are not implemented (use json, regex, choice or grammar)";

// vLLM's schema, in its order. Implemented fields are listed too, so that they are not taken
// for unknown ones.
const FieldRule kFields[] = {
    // OpenAI's fields
    {"messages", kChat, nullptr, nullptr},
    {"prompt", kCompletions, nullptr, nullptr},
    {"model", kBoth, nullptr, nullptr},
    {"frequency_penalty", kBoth, nullptr, nullptr},
    {"presence_penalty", kBoth, nullptr, nullptr},
    {"logit_bias", kBoth, nullptr, nullptr},
    {"logprobs", kBoth, nullptr, nullptr},
    {"top_logprobs", kChat, nullptr, nullptr},
    {"max_tokens", kBoth, nullptr, nullptr},
    {"max_completion_tokens", kBoth, nullptr, nullptr},
    {"n", kBoth, nullptr, nullptr},
    {"best_of", kBoth, nullptr, nullptr},
    {"echo", kBoth, nullptr, nullptr},
    {"seed", kBoth, nullptr, nullptr},
    {"stop", kBoth, nullptr, nullptr},
    {"stream", kBoth, nullptr, nullptr},
    {"stream_options", kBoth, nullptr, nullptr},
    {"temperature", kBoth, nullptr, nullptr},
    {"top_p", kBoth, nullptr, nullptr},
    {"tools", kChat, nullptr, nullptr},
    {"tool_choice", kChat, nullptr, nullptr},
    {"user", kBoth, nullptr, nullptr},                 // ignored by vLLM too
    {"parallel_tool_calls", kChat, nullptr, nullptr},  // ignored by vLLM: the model decides
    {"response_format", kBoth, nullptr, nullptr},      // config/structured_request.h
    {"suffix", kCompletions, never, "suffix (fill-in-the-middle) is not supported"},
    {"reasoning_effort", kChat, never, "reasoning_effort is not supported (use chat_template_kwargs)"},
    {"include_reasoning", kChat, is_true, "include_reasoning=false is not supported"},
    {"prompt_embeds", kCompletions, never, "prompt embeddings are not supported"},
    // vLLM's sampling parameters
    {"use_beam_search", kBoth, is_false, "beam search is not implemented"},
    {"top_k", kBoth, nullptr, nullptr},
    {"min_p", kBoth, nullptr, nullptr},
    {"repetition_penalty", kBoth, nullptr, nullptr},
    {"length_penalty", kBoth, is_one, "length_penalty applies to beam search, which is not implemented"},
    {"stop_token_ids", kBoth, nullptr, nullptr},
    {"include_stop_str_in_output", kBoth, nullptr, nullptr},
    {"ignore_eos", kBoth, nullptr, nullptr},
    {"min_tokens", kBoth, nullptr, nullptr},
    {"skip_special_tokens", kBoth, nullptr, nullptr},
    {"spaces_between_special_tokens", kBoth, is_true, "spaces_between_special_tokens=false is not supported"},
    {"truncate_prompt_tokens", kBoth, never, "prompt truncation is not supported"},
    {"prompt_logprobs", kBoth, nullptr, nullptr},
    {"allowed_token_ids", kBoth, nullptr, nullptr},  // config/request_json.h
    {"bad_words", kBoth, nullptr, nullptr},
    {"thinking_token_budget", kBoth, never, "thinking_token_budget is not supported"},
    // vLLM's extra parameters
    {"add_generation_prompt", kChat, nullptr, nullptr},
    {"continue_final_message", kChat, is_false, "continue_final_message is not supported"},
    // The tokenizer's post-processor specials (BOS of Llama / Mistral); default true for
    // completions, false for chat (the template writes them), as vLLM.
    {"add_special_tokens", kBoth, nullptr, nullptr},
    {"documents", kChat, never, "documents (RAG templates) are not supported"},
    {"chat_template", kChat, nullptr, nullptr},
    {"chat_template_kwargs", kChat, nullptr, nullptr},
    {"mm_processor_kwargs", kBoth, never, "multimodal inputs are not supported"},
    {"media_io_kwargs", kBoth, never, "multimodal inputs are not supported"},
    // Structured outputs: read by config/structured_request.h.
    {"structured_outputs", kBoth, nullptr, nullptr},
    {"guided_json", kBoth, nullptr, nullptr},
    {"guided_regex", kBoth, nullptr, nullptr},
    {"guided_choice", kBoth, nullptr, nullptr},
    {"guided_grammar", kBoth, nullptr, nullptr},
    {"structural_tag", kBoth, never, kNoStructuralTag},
    {"guided_decoding_backend", kBoth, nullptr, nullptr},
    {"guided_whitespace_pattern", kBoth, nullptr, nullptr},
    {"priority", kBoth, nullptr, nullptr},  // read by config/request_json.h
    {"request_id", kBoth, nullptr, nullptr},
    {"logits_processors", kBoth, never, "custom logits processors are not supported"},
    {"return_tokens_as_token_ids", kBoth, is_false, "return_tokens_as_token_ids is not supported"},
    {"return_token_ids", kBoth, is_false, "return_token_ids is not supported"},
    {"cache_salt", kBoth, never, "cache_salt is not supported"},
    {"kv_transfer_params", kBoth, never, "disaggregated serving (kv_transfer_params) is not supported"},
    {"vllm_xargs", kBoth, never, "vllm_xargs is not supported"},
};

}  // namespace

std::vector<std::string> audit_request_fields(const ojson& body, Endpoint endpoint) {
  const unsigned ep = endpoint == Endpoint::ChatCompletions ? kChat : kCompletions;
  std::vector<std::string> unknown;
  for (auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const FieldRule& r : kFields)
      if ((r.endpoints & ep) && key == r.name) rule = &r;
    if (!rule) {
      unknown.push_back(key);
      continue;
    }
    if (!rule->is_default || value.is_null() || rule->is_default(value)) continue;
    throw ApiError(400, "'" + key + "' is not supported by this server: " + rule->why, key, "unsupported_parameter");
  }
  return unknown;
}

}  // namespace nanovllm::server
