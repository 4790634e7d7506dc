// CPU sampling, the reference for the GPU sampler. Per row of logits [V]:
//   the row's structured-output mask (SamplingRow::allowed) and logits processing first, on a copy;
//   greedy (temperature 0): argmax (lowest index on ties)
//   else: p = softmax(logits / T); keep the top_k largest, then the smallest set whose mass
//   reaches top_p (on the renormalised top-k distribution), then those with p >= min_p * max p;
//   token = argmax over the kept i of p_i / E_i, E_i = -log(u_i) ~ Exp(1), u_i = sampling_uniform(seed,
//   position, i) (Gumbel-max in its exponential form), computed in log space as the score
//   fma(l_i, 1/T, -log(E_i)) = log(p_i / E_i) + a constant of the row: without filters one pass over
//   the logits, no softmax (the GPU sampler's fast path, whose cost is the noise, not the bytes).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/sampling_noise.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

int32_t sample_row_cpu(const float* logits, int64_t V, const SamplingRow& row) {
  if (row.temperature <= 0.0f) {
    return int32_t(std::max_element(logits, logits + V) - logits);
  }
  const float inv_t = 1.0f / row.temperature;
  auto score = [&](int64_t i) {
    const float e = -std::log(sampling_uniform(row.seed, uint64_t(row.position), uint64_t(i)));
    return std::fma(logits[i], inv_t, -std::log(e));
  };
  auto best_of = [&](auto kept) {
    int32_t best = -1;
    float best_score = -INFINITY;
    for (int64_t i = 0; i < V; ++i) {
      if (!kept(i)) continue;
      const float s = score(i);
      if (s > best_score) {
        best_score = s;
        best = int32_t(i);
      }
    }
    // Nothing kept, or every score -inf (logits masked to -inf): the greedy token.
    return best >= 0 ? best : int32_t(std::max_element(logits, logits + V) - logits);
  };
  const bool use_k = row.top_k > 0 && row.top_k < V, use_p = row.top_p < 1.0f;
  if (!use_k && !use_p && row.min_p <= 0.0f) return best_of([](int64_t) { return true; });
  float mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, logits[i] * inv_t);
  std::vector<float> p(static_cast<size_t>(V));
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += (p[size_t(i)] = std::exp(logits[i] * inv_t - mx));
  for (auto& x : p) x = float(x / sum);
  std::vector<char> keep(size_t(V), 1);
  if (use_k || use_p) {
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = use_k ? row.top_k : V;
    auto by_prob = [&](int32_t a, int32_t b) {
      return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), by_prob);
    std::fill(keep.begin(), keep.end(), 0);
    double mass_k = 0;
    for (int64_t r = 0; r < k; ++r) mass_k += p[size_t(order[size_t(r)])];
    double cum = 0;
    for (int64_t r = 0; r < k; ++r) {
      const int32_t id = order[size_t(r)];
      keep[size_t(id)] = 1;
      cum += p[size_t(id)] / mass_k;
      if (use_p && cum >= row.top_p) break;
    }
  }
  if (row.min_p > 0.0f) {
    const float pmax = *std::max_element(p.begin(), p.end());
    for (int64_t i = 0; i < V; ++i)
      if (p[size_t(i)] < row.min_p * pmax) keep[size_t(i)] = 0;
  }
  return best_of([&](int64_t i) { return keep[size_t(i)] != 0; });
}

// A row: its structured-output mask then logits processing (on a copy, so raw logprobs still see
// the model's logits), sampling, then the logprobs it asked for.
std::vector<int32_t> CpuBackend::sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                        std::vector<TokenLogprobs>* logprobs) {
  if (logits.dim() != 2 || logits.size(0) != int64_t(rows.size()) || logits.dtype() != DType::F32)
    throw Error("sample: logits must be F32 [B, V] with one sampling row each, got " + shape_str(logits.shape()));
  const int64_t B = logits.size(0), V = logits.size(1);
  const bool any_logprobs = std::any_of(rows.begin(), rows.end(), [](auto& r) { return r.num_logprobs >= 0; });
  if (any_logprobs && !logprobs) throw Error("sample: a row asks for logprobs but no output was given");
  if (logprobs) logprobs->assign(size_t(B), TokenLogprobs{});
  std::vector<int32_t> out(static_cast<size_t>(B));
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    const SamplingRow& row = rows[size_t(b)];
    const float* raw = logits.data<float>() + b * V;
    const float* src = raw;
    std::vector<float> processed;
    if (row.allowed || row.processing) {
      processed.assign(raw, raw + V);
      if (row.allowed) apply_allowed_mask(processed.data(), V, row.allowed);
      if (row.processing) apply_logits_processing(processed.data(), V, *row.processing);
      src = processed.data();
    }
    out[size_t(b)] = sample_row_cpu(src, V, row);
    if (row.num_logprobs >= 0) {
      const float scale = row.processed_logprobs && row.temperature > 0 ? 1.0f / row.temperature : 1.0f;
      (*logprobs)[size_t(b)] =
          row_logprobs(row.processed_logprobs ? src : raw, V, scale, out[size_t(b)], row.num_logprobs);
    }
  }
  return out;
}

std::vector<TokenLogprobs> CpuBackend::token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens, int n) {
  if (logits.dim() != 2 || logits.size(0) != int64_t(tokens.size()) || logits.dtype() != DType::F32)
    throw Error("token_logprobs: logits must be F32 [B, V] with one token each, got " + shape_str(logits.shape()));
  const int64_t B = logits.size(0), V = logits.size(1);
  std::vector<TokenLogprobs> out(static_cast<size_t>(B));
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    const int32_t t = tokens[size_t(b)];
    if (t >= 0 && t < V) out[size_t(b)] = row_logprobs(logits.data<float>() + b * V, V, 1.0f, t, n);
  }
  for (int32_t t : tokens)
    if (t < 0 || t >= V) throw Error("token_logprobs: token id " + std::to_string(t) + " is outside the vocabulary");
  return out;
}

}  // namespace nanovllm
