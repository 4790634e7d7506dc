#include "nanovllm/server/openai_logprobs.h"

#include <algorithm>

#include "nanovllm/config/request_json.h"
#include "nanovllm/server/request_field_errors.h"

namespace nanovllm::server {

namespace {

using fields::field;

constexpr int kMaxN = 256;  // parallel samples of one prompt

int64_t integer(const ojson& v, const char* name) {
  try {
    return request_integer(v, name);
  } catch (const InvalidRequest& e) {
    throw ApiError(400, e.what(), name, "invalid_type");
  }
}

std::string token_text(const ModelInfo& m, int32_t id) {
  const Tokenizer* tok = m.llm ? m.llm->tokenizer() : nullptr;
  if (!tok) return "token_id:" + std::to_string(id);  // vLLM's return_tokens_as_token_ids form
  if (id < 0 || id >= tok->vocab_size()) return "";
  return tok->decode({id}, false);
}

double floored(float lp) { return std::max(double(lp), -9999.0); }

ojson bytes_of(const std::string& s) {
  ojson b = ojson::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// vLLM's per-step dict: the sampled token first, then the top N not already in it.
std::vector<std::pair<int32_t, float>> step_entries(int32_t id, const TokenLogprobs& lp) {
  std::vector<std::pair<int32_t, float>> e{{id, lp.logprob}};
  for (auto& t : lp.top)
    if (t.first != id) e.push_back(t);
  return e;
}

}  // namespace

void read_choice_fields(const ojson& body, GenerationRequest& r) {
  if (const ojson* n = field(body, "n")) {
    const int64_t v = integer(*n, "n");
    if (v < 1 || v > kMaxN)
      throw ApiError(400, "n must be in [1, " + std::to_string(kMaxN) + "], got " + std::to_string(v) + ".", "n");
    r.params.n = int(v);
  }
  if (const ojson* b = field(body, "best_of")) {
    const int64_t v = integer(*b, "best_of");
    if (v != r.params.n)
      throw ApiError(400,
                     "best_of is not supported unless it equals n (got best_of=" + std::to_string(v) +
                         ", n=" + std::to_string(r.params.n) + ")",
                     "best_of", "unsupported_parameter");
  }
  const ojson* lp = field(body, "logprobs");
  const ojson* plp = field(body, "prompt_logprobs");
  if (r.endpoint == Endpoint::Completions) {
    if (const ojson* t = field(body, "top_logprobs"))
      throw ApiError(400, "top_logprobs is a chat field; completions take logprobs: N (got " + t->dump() + ")",
                     "top_logprobs", "unsupported_parameter");
    if (const ojson* e = field(body, "echo")) {
      if (!e->is_boolean()) throw ApiError(400, "'echo' must be a boolean", "echo", "invalid_type");
      r.echo = e->get<bool>();
    }
    if (plp) {
      const int64_t v = integer(*plp, "prompt_logprobs");
      if (v < 0)
        throw ApiError(400, "prompt_logprobs must be non-negative, got " + std::to_string(v) + ".", "prompt_logprobs");
      const ojson* stream = field(body, "stream");
      if (stream && stream->is_boolean() && stream->get<bool>())
        throw ApiError(400, "prompt_logprobs is not implemented for streamed completions (stream: true)",
                       "prompt_logprobs", "unsupported_parameter");
      r.params.prompt_logprobs = int(std::min<int64_t>(v, 1 << 30));
    }
    if (!lp) return;
    if (!lp->is_number_integer()) throw ApiError(400, "'logprobs' must be an integer", "logprobs", "invalid_type");
    const int64_t v = integer(*lp, "logprobs");
    if (v < 0) throw ApiError(400, "logprobs must be non-negative, got " + std::to_string(v) + ".", "logprobs");
    r.params.logprobs = int(std::min<int64_t>(v, 1 << 30));
    // echo with logprobs lists the prompt's tokens too: theirs are prompt logprobs (as vLLM).
    if (r.echo && !r.params.prompt_logprobs) r.params.prompt_logprobs = r.params.logprobs;
    return;
  }
  if (plp)
    throw ApiError(400, "prompt_logprobs is not implemented for chat completions (got " + plp->dump() + ")",
                   "prompt_logprobs", "unsupported_parameter");
  const bool want = lp && (lp->is_boolean() ? lp->get<bool>() : true);
  if (lp && !lp->is_boolean()) throw ApiError(400, "'logprobs' must be a boolean", "logprobs", "invalid_type");
  const ojson* top = field(body, "top_logprobs");
  int64_t n = 0;
  if (top) {
    n = integer(*top, "top_logprobs");
    if (n < 0) throw ApiError(400, "top_logprobs must be non-negative, got " + std::to_string(n) + ".", "top_logprobs");
    if (!want) throw ApiError(400, "when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if (want) r.params.logprobs = int(std::min<int64_t>(n, 1 << 30));
}

ojson logprobs_json(const ModelInfo& m, Endpoint ep, int num_top, const std::vector<int32_t>& ids,
                    const std::vector<TokenLogprobs>& lps, int64_t text_offset, bool first_unscored) {
  if (ep == Endpoint::ChatCompletions) {
    ojson content = ojson::array();
    for (size_t i = 0; i < std::min(ids.size(), lps.size()); ++i) {
      const std::string tok = token_text(m, ids[i]);
      ojson top = ojson::array();
      const auto entries = step_entries(ids[i], lps[i]);
      for (size_t k = 0; k < entries.size() && int(k) < num_top; ++k) {
        const std::string t = token_text(m, entries[k].first);
        top.push_back({{"token", t}, {"logprob", floored(entries[k].second)}, {"bytes", bytes_of(t)}});
      }
      content.push_back(
          {{"token", tok}, {"logprob", floored(lps[i].logprob)}, {"bytes", bytes_of(tok)}, {"top_logprobs", top}});
    }
    return {{"content", std::move(content)}};
  }
  ojson offsets = ojson::array(), token_lps = ojson::array(), tokens = ojson::array(), tops = ojson::array();
  const size_t skip = first_unscored ? 1 : 0;  // echo: the prompt's first token has no logprob
  for (size_t i = 0; i < ids.size() && i < lps.size() + skip; ++i) {
    const std::string tok = token_text(m, ids[i]);
    offsets.push_back(text_offset);
    text_offset += text_chars(tok);
    tokens.push_back(tok);
    if (i < skip) {
      token_lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    const TokenLogprobs& lp = lps[i - skip];
    token_lps.push_back(floored(lp.logprob));
    ojson top = ojson::object();
    for (auto& [id, v] : step_entries(ids[i], lp)) {
      const std::string t = token_text(m, id);
      if (!top.contains(t)) top[t] = floored(v);
    }
    tops.push_back(std::move(top));
  }
  return {{"text_offset", std::move(offsets)},
          {"token_logprobs", std::move(token_lps)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(tops)}};
}

ojson prompt_logprobs_json(const ModelInfo& m, const std::vector<int32_t>& prompt,
                           const std::vector<TokenLogprobs>& lps) {
  ojson out = ojson::array();
  if (prompt.empty()) return out;
  out.push_back(nullptr);
  for (size_t i = 0; i + 1 < prompt.size() && i < lps.size(); ++i) {
    const int32_t id = prompt[i + 1];
    ojson step = ojson::object();
    step[std::to_string(id)] = {
        {"logprob", floored(lps[i].logprob)}, {"rank", lps[i].rank}, {"decoded_token", token_text(m, id)}};
    for (size_t k = 0; k < lps[i].top.size(); ++k) {
      const auto& [tid, v] = lps[i].top[k];
      if (tid == id) continue;
      step[std::to_string(tid)] = {
          {"logprob", floored(v)}, {"rank", int(k) + 1}, {"decoded_token", token_text(m, tid)}};
    }
    out.push_back(std::move(step));
  }
  return out;
}

std::string prompt_text(const ModelInfo& m, const std::vector<int32_t>& prompt) {
  const Tokenizer* tok = m.llm ? m.llm->tokenizer() : nullptr;
  if (!tok) return "";
  std::vector<int32_t> ids;
  for (int32_t t : prompt)
    if (t < tok->vocab_size()) ids.push_back(t);
  return tok->decode(ids, false);
}

LogprobsAssembler::LogprobsAssembler(const ModelInfo& m, const GenerationRequest& req)
    : m_(m), endpoint_(req.endpoint), n_(req.params.n), logprobs_(req.params.logprobs),
      prompt_logprobs_(req.params.prompt_logprobs), echo_(req.echo) {
  if (echo_ || prompt_logprobs_) prompts_ = req.prompts;
  prompt_lps_.resize(req.prompts.size());
  choices_.resize(req.prompts.size() * size_t(n_));
}

void LogprobsAssembler::collect(const ChoiceEvent& e) {
  if (!active() || e.index < 0 || size_t(e.index) >= choices_.size()) return;
  if (!e.prompt_logprobs.empty()) prompt_lps_[prompt_of(e.index)] = e.prompt_logprobs;
  auto& c = choices_[size_t(e.index)].logprobs;
  c.insert(c.end(), e.logprobs.begin(), e.logprobs.end());
}

void LogprobsAssembler::complete(std::vector<ChoiceResult>& choices) const {
  if (!active()) return;
  for (size_t k = 0; k < choices.size() && k < choices_.size(); ++k) {
    ChoiceResult& c = choices[k];
    const size_t p = prompt_of(int(k));
    if (logprobs_) {
      if (echo_) {
        std::vector<int32_t> ids = prompts_[p];
        ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
        std::vector<TokenLogprobs> lps = prompt_lps_[p];
        lps.insert(lps.end(), choices_[k].logprobs.begin(), choices_[k].logprobs.end());
        c.logprobs = logprobs_json(m_, endpoint_, *logprobs_, ids, lps, 0, true);
      } else {
        c.logprobs = logprobs_json(m_, endpoint_, *logprobs_, c.token_ids, choices_[k].logprobs, 0);
      }
    }
    if (prompt_logprobs_) c.prompt_logprobs = prompt_logprobs_json(m_, prompts_[p], prompt_lps_[p]);
    if (echo_) c.text = prompt_text(m_, prompts_[p]) + c.text;
  }
}

std::pair<std::string, ojson> LogprobsAssembler::stream(const ChoiceEvent& e) {
  if (!active() || e.index < 0 || size_t(e.index) >= choices_.size()) return {e.text, nullptr};
  const size_t p = prompt_of(e.index);
  if (!e.prompt_logprobs.empty()) prompt_lps_[p] = e.prompt_logprobs;
  Choice& c = choices_[size_t(e.index)];
  const bool echo_now = echo_ && !c.started;
  c.started = true;
  std::string text = echo_now ? prompt_text(m_, prompts_[p]) + e.text : e.text;
  ojson lps;
  if (logprobs_ && (echo_now || !e.logprobs.empty())) {
    if (echo_now) {
      std::vector<int32_t> ids = prompts_[p];
      ids.insert(ids.end(), e.token_ids.begin(), e.token_ids.end());
      std::vector<TokenLogprobs> all = prompt_lps_[p];
      all.insert(all.end(), e.logprobs.begin(), e.logprobs.end());
      lps = logprobs_json(m_, endpoint_, *logprobs_, ids, all, c.text_offset, true);
    } else {
      lps = logprobs_json(m_, endpoint_, *logprobs_, e.token_ids, e.logprobs, c.text_offset);
    }
  }
  c.text_offset += text_chars(text);
  return {std::move(text), std::move(lps)};
}

int64_t text_chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace nanovllm::server
