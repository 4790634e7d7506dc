#include "nanovllm/server/openai_logprobs.h"

#include <algorithm>

#include "nanovllm/request_json.h"

namespace nanovllm::server {

namespace {

constexpr int kMaxN = 256;  // parallel samples of one prompt

const ojson* field(const ojson& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

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
  if (const ojson* p = field(body, "prompt_logprobs"))
    throw ApiError(400, "prompt_logprobs is not implemented by this server (got " + p->dump() + ")", "prompt_logprobs",
                   "unsupported_parameter");
  const ojson* lp = field(body, "logprobs");
  if (r.endpoint == Endpoint::Completions) {
    if (const ojson* t = field(body, "top_logprobs"))
      throw ApiError(400, "top_logprobs is a chat field; completions take logprobs: N (got " + t->dump() + ")",
                     "top_logprobs", "unsupported_parameter");
    if (!lp) return;
    if (!lp->is_number_integer()) throw ApiError(400, "'logprobs' must be an integer", "logprobs", "invalid_type");
    const int64_t v = integer(*lp, "logprobs");
    if (v < 0) throw ApiError(400, "logprobs must be non-negative, got " + std::to_string(v) + ".", "logprobs");
    r.params.logprobs = int(std::min<int64_t>(v, 1 << 30));
    return;
  }
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
                    const std::vector<TokenLogprobs>& lps, int64_t text_offset) {
  const size_t n = std::min(ids.size(), lps.size());
  if (ep == Endpoint::ChatCompletions) {
    ojson content = ojson::array();
    for (size_t i = 0; i < n; ++i) {
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
  for (size_t i = 0; i < n; ++i) {
    const std::string tok = token_text(m, ids[i]);
    offsets.push_back(text_offset);
    text_offset += text_chars(tok);
    token_lps.push_back(floored(lps[i].logprob));
    tokens.push_back(tok);
    ojson top = ojson::object();
    for (auto& [id, v] : step_entries(ids[i], lps[i])) {
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

int64_t text_chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace nanovllm::server
