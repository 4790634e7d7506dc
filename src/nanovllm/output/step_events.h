// One engine step as per-request events for the output processors: each request that got a token
// or finished, with the token (-1 when none) and, on its last event, the engine's finish reason
// and final output. The engine lists a finishing request's last token among new_tokens and again
// among finished; the processors need both at once (the stopping token is not shown as text).
// A request may get several tokens in one step (speculative decoding): one event each, in order,
// its prompt logprobs on the first and its finish on the last.
#pragma once
#include <map>
#include <vector>

#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::output {

struct TokenEvent {
  int64_t request_id;
  int32_t token;                             // -1: the request finished without a new token
  FinishReason finish = FinishReason::None;  // the engine's
  const RequestOutput* finished = nullptr;   // set with `finish`; points into the StepResult
  const TokenLogprobs* logprobs = nullptr;   // the token's logprobs when its request asked; into the StepResult
  // With a request's first token, when it asked: the logprobs of its prompt; into the StepResult.
  const std::vector<TokenLogprobs>* prompt_logprobs = nullptr;
};

inline std::vector<TokenEvent> step_events(const StepResult& r) {
  std::map<int64_t, const RequestOutput*> fin;
  for (auto& f : r.finished) fin[f.request_id] = &f;
  std::map<int64_t, const std::vector<TokenLogprobs>*> prompt;  // the engine lists them with a new token
  for (auto& [rid, lps] : r.prompt_logprobs) prompt[rid] = &lps;
  std::map<int64_t, size_t> last;  // each request's last token in new_tokens
  for (size_t k = 0; k < r.new_tokens.size(); ++k) last[r.new_tokens[k].first] = k;
  std::vector<TokenEvent> out;
  out.reserve(r.new_tokens.size());
  for (size_t k = 0; k < r.new_tokens.size(); ++k) {
    const auto [rid, tok] = r.new_tokens[k];
    const TokenLogprobs* lp = k < r.new_logprobs.size() ? &r.new_logprobs[k] : nullptr;
    const auto pit = prompt.find(rid);
    const std::vector<TokenLogprobs>* plp = nullptr;
    if (pit != prompt.end()) {
      plp = pit->second;
      prompt.erase(pit);
    }
    auto it = last[rid] == k ? fin.find(rid) : fin.end();
    if (it == fin.end()) {
      out.push_back({rid, tok, FinishReason::None, nullptr, lp, plp});
    } else {
      out.push_back({rid, tok, it->second->finish_reason, it->second, lp, plp});
      fin.erase(it);
    }
  }
  for (auto& [rid, f] : fin) out.push_back({rid, -1, f->finish_reason, f});
  return out;
}

}  // namespace nanovllm::output
