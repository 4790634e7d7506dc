#include "nanovllm/backends/logits_processing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "nanovllm/utils/error.h"

namespace nanovllm {

LogitAdjust& LogitsProcessingBuilder::entry(LogitsProcessing& lp, int32_t token) {
  if (token < 0 || size_t(token) >= stamp_.size())
    throw Error("logits processing: token id " + std::to_string(token) + " is outside the vocabulary");
  if (stamp_[size_t(token)] != gen_) {
    stamp_[size_t(token)] = gen_;
    slot_[size_t(token)] = int32_t(lp.entries.size());
    lp.entries.push_back({token, 0, 0, 0.0f});
  }
  return lp.entries[size_t(slot_[size_t(token)])];
}

LogitsProcessing LogitsProcessingBuilder::build(const SamplingParams& p, const std::vector<int32_t>& tokens,
                                                int64_t num_prompt, const std::vector<int32_t>& eos_ids) {
  if (num_prompt < 0 || num_prompt > int64_t(tokens.size()))
    throw Error("logits processing: a prompt of " + std::to_string(num_prompt) + " tokens in a sequence of " +
                std::to_string(tokens.size()));
  const auto prompt_end = tokens.begin() + num_prompt;
  if (++gen_ == 0) {  // wrapped: forget every stamp
    std::fill(stamp_.begin(), stamp_.end(), 0u);
    gen_ = 1;
  }
  LogitsProcessing lp;
  lp.repetition_penalty = p.repetition_penalty;
  lp.frequency_penalty = p.frequency_penalty;
  lp.presence_penalty = p.presence_penalty;
  const bool rep = p.repetition_penalty != 1.0f, out_pen = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (rep)
    for (auto it = tokens.begin(); it != prompt_end; ++it) entry(lp, *it).flags |= kAdjustSeen;
  if (rep || out_pen)
    for (auto it = prompt_end; it != tokens.end(); ++it) {
      LogitAdjust& e = entry(lp, *it);
      e.flags |= kAdjustSeen;
      ++e.output_count;
    }
  for (auto& [t, bias] : p.logit_bias)
    if (bias != 0.0f) entry(lp, t).bias += bias;
  if (int64_t(tokens.size()) - num_prompt < p.min_tokens) {
    if (!p.ignore_eos)
      for (int32_t t : eos_ids) entry(lp, t).flags |= kAdjustBanned;
    for (int32_t t : p.stop_token_ids) entry(lp, t).flags |= kAdjustBanned;
  }
  return lp;
}

void apply_logits_processing(float* logits, int64_t V, const LogitsProcessing& p) {
  const float inv_rep = 1.0f / p.repetition_penalty;
  for (const LogitAdjust& e : p.entries) {
    if (e.token < 0 || e.token >= V) throw Error("logits processing: token id outside the logits row");
    logits[e.token] =
        adjust_logit(logits[e.token], e, p.repetition_penalty, inv_rep, p.frequency_penalty, p.presence_penalty);
  }
}

void apply_allowed_mask(float* logits, int64_t V, const uint32_t* allowed) {
  for (int64_t i = 0; i < V; ++i)
    if (!token_allowed(allowed, i)) logits[i] = -INFINITY;
}

TokenLogprobs row_logprobs(const float* logits, int64_t V, float scale, int32_t token, int n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, logits[i] * scale);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(logits[i] * scale) - double(mx));
  const double lse = double(mx) + std::log(sum);
  auto lp = [&](int64_t i) { return float(double(logits[i] * scale) - lse); };
  TokenLogprobs out;
  out.logprob = lp(token);
  const float xt = logits[token] * scale;
  out.rank = 1;
  for (int64_t i = 0; i < V; ++i) out.rank += logits[i] * scale > xt;
  const int64_t k = std::min<int64_t>(n, V);
  if (k > 0) {
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return logits[a] * scale > logits[b] * scale || (logits[a] * scale == logits[b] * scale && a < b);
    });
    for (int64_t r = 0; r < k; ++r) out.top.emplace_back(order[size_t(r)], lp(order[size_t(r)]));
  }
  return out;
}

}  // namespace nanovllm
