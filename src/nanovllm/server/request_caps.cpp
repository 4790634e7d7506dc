#include "nanovllm/server/request_caps.h"

namespace nanovllm::server {

namespace {
[[noreturn]] void refuse(const std::string& param, const std::string& msg) {
  throw ApiError(400, msg, param, "limit_exceeded");
}
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

RequestCaps request_caps(const EngineConfig& cfg, int64_t vocab_size) {
  RequestCaps c;
  c.max_stop_strings = cfg.max_stop_strings;
  c.max_stop_bytes = cfg.max_stop_bytes;
  c.max_request_id_length = cfg.max_request_id_length;
  c.max_prompt_logprob_entries = cfg.max_prompt_logprob_entries;
  c.vocab_size = vocab_size;
  return c;
}

int64_t max_text_bytes(const ModelInfo& m) { return kMaxBytesPerToken * m.max_model_len; }

void check_text_bytes(int64_t bytes, const std::string& param, const ModelInfo& m) {
  if (bytes <= max_text_bytes(m)) return;
  refuse(param, param + ": the text to tokenize has " + str(bytes) + " bytes, more than the limit of " +
                    str(max_text_bytes(m)) + " (" + str(kMaxBytesPerToken) + " bytes per token x max_model_len " +
                    str(m.max_model_len) + "): it cannot fit the model's context");
}

void check_request_id(const std::string& id, const ModelInfo& m) {
  if (int64_t(id.size()) <= m.caps.max_request_id_length) return;
  refuse("request_id", "the request id (request_id or X-Request-Id) has " + str(int64_t(id.size())) +
                           " bytes, more than the limit of " + str(m.caps.max_request_id_length) +
                           " (--max-request-id-length)");
}

void check_stop_caps(const ojson* stop, const ModelInfo& m) {
  if (!stop || !(stop->is_string() || stop->is_array())) return;  // absent, or a type error read_sampling_fields names
  const RequestCaps& caps = m.caps;
  const int64_t count = stop->is_string() ? 1 : int64_t(stop->size());
  if (count > caps.max_stop_strings)
    refuse("stop", "stop: " + str(count) + " stop strings, more than the limit of " + str(caps.max_stop_strings) +
                       " (--max-stop-strings)");
  auto bytes = [](const ojson& s) { return s.is_string() ? int64_t(s.get_ref<const std::string&>().size()) : 0; };
  int64_t stop_bytes = stop->is_string() ? bytes(*stop) : 0;
  if (stop->is_array())
    for (auto& s : *stop) stop_bytes += bytes(s);
  if (stop_bytes > caps.max_stop_bytes)
    refuse("stop", "stop: the stop strings have " + str(stop_bytes) + " bytes together, more than the limit of " +
                       str(caps.max_stop_bytes) + " (--max-stop-bytes)");
}

void check_request_caps(const GenerationRequest& r, const ModelInfo& m) {
  const RequestCaps& caps = m.caps;
  const int64_t biases = int64_t(r.params.logit_bias.size());
  if (caps.vocab_size > 0 && biases > caps.vocab_size)
    refuse("logit_bias",
           "logit_bias: " + str(biases) + " entries, more than the vocabulary's " + str(caps.vocab_size) + " tokens");
  if (r.params.prompt_logprobs) {
    int64_t tokens = 0;
    for (auto& p : r.prompts) tokens += int64_t(p.size());
    const int64_t k = *r.params.prompt_logprobs < 0 ? caps.vocab_size : *r.params.prompt_logprobs;  // -1: all
    const int64_t per_token = k + 1;
    if (tokens * per_token > caps.max_prompt_logprob_entries)
      refuse("prompt_logprobs", "prompt_logprobs: " + str(tokens) + " prompt tokens x " + str(per_token) +
                                    " logprobs each = " + str(tokens * per_token) +
                                    " entries, more than the limit of " + str(caps.max_prompt_logprob_entries) +
                                    " per request (--max-prompt-logprob-entries)");
  }
}

}  // namespace nanovllm::server
