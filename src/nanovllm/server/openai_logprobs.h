// The OpenAI fields of parallel samples and logprobs, both ways: `n`, `best_of`, `logprobs`,
// `top_logprobs`, `prompt_logprobs` of a request -> SamplingParams; the engine's TokenLogprobs ->
// the "logprobs" value of a choice or stream chunk, in vLLM's shapes:
//   completions: {"text_offset": [...], "token_logprobs": [...], "tokens": [...],
//                 "top_logprobs": [{token text: logprob}, ...]}  (sampled token + top N per step)
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//                 "bytes"}]}]}  (the first N of sampled token + top N, as vLLM lists them)
// Token texts are each id decoded alone (special tokens kept), as vLLM's detokenizer does for
// logprobs; logprobs are floored at -9999.0 (-inf cannot be JSON), as vLLM does.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

// Reads n, best_of (refused unless equal to n), logprobs (completions: an integer; chat: a boolean
// with top_logprobs), and for completions echo and prompt_logprobs (not streamed; chat: refused).
void read_choice_fields(const ojson& body, GenerationRequest& r);

// The "logprobs" of tokens `ids` with their `lps` (same length): `num_top` is the request's N;
// `text_offset` (completions) is where the first token's text starts in the choice's text.
// first_unscored (completions with echo): ids[0] is the prompt's first token, which has no logprob
// (null entries); lps then covers ids[1..].
ojson logprobs_json(const ModelInfo& m, Endpoint ep, int num_top, const std::vector<int32_t>& ids,
                    const std::vector<TokenLogprobs>& lps, int64_t text_offset, bool first_unscored = false);

// A completion choice's "prompt_logprobs" (vLLM): [null, {"id": {"logprob", "rank", "decoded_token"}}, ...],
// each step the prompt token then the top N.
ojson prompt_logprobs_json(const ModelInfo& m, const std::vector<int32_t>& prompt,
                           const std::vector<TokenLogprobs>& lps);
// The prompt's text for echo (ids decoded, special tokens kept).
std::string prompt_text(const ModelInfo& m, const std::vector<int32_t>& prompt);

// A request's logprobs and echo, choice by choice (choice k: prompt k / n, sample k % n): collects
// the events of each choice and builds what the response or each stream chunk shows.
class LogprobsAssembler {
 public:
  LogprobsAssembler(const ModelInfo& m, const GenerationRequest& req);
  bool active() const { return logprobs_ || prompt_logprobs_ || echo_; }

  // Non-streamed: every event, then the choices' logprobs, prompt_logprobs and echoed prompt.
  void collect(const ChoiceEvent& e);
  void complete(std::vector<ChoiceResult>& choices) const;

  // Streamed: the text an event's chunk shows (the prompt before a choice's first text when
  // echoing) and its "logprobs" (null unless asked).
  std::pair<std::string, ojson> stream(const ChoiceEvent& e);

 private:
  struct Choice {
    std::vector<TokenLogprobs> logprobs;
    bool started = false;  // streamed: the echo went out
    int64_t text_offset = 0;
  };
  size_t prompt_of(int index) const { return size_t(index / n_); }
  const ModelInfo& m_;
  Endpoint endpoint_;
  int n_;
  std::optional<int> logprobs_, prompt_logprobs_;
  bool echo_;
  std::vector<std::vector<int32_t>> prompts_;           // when echoing or asked for prompt logprobs
  std::vector<std::vector<TokenLogprobs>> prompt_lps_;  // per prompt, from its first choice
  std::vector<Choice> choices_;
};

// Characters (code points) of UTF-8 text: Python's len(), which vLLM's text offsets count.
int64_t text_chars(const std::string& s);

}  // namespace nanovllm::server
