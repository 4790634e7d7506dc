// Draft verification rules (verification.h): the coupled prefix match the engine uses, and the
// general rejection sampler (residual distribution max(0, p - q)).
#include "nanovllm/spec/verification.h"

#include <algorithm>
#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm {

int64_t accepted_prefix(std::span<const int32_t> drafts, std::span<const int32_t> targets) {
  if (targets.size() != drafts.size() + 1)
    throw Error("verification: " + std::to_string(drafts.size()) + " drafts need " + std::to_string(drafts.size() + 1) +
                " target tokens, got " + std::to_string(targets.size()));
  int64_t a = 0;
  while (a < int64_t(drafts.size()) && drafts[size_t(a)] == targets[size_t(a)]) ++a;
  return a;
}

namespace {

// Inverse-CDF draw from unnormalized weights w (sum > 0); the last positive index on rounding.
int32_t draw(std::span<const double> w, double u) {
  double total = 0;
  for (double x : w) total += x;
  double target = u * total, cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    last = int32_t(i);
    cum += w[i];
    if (target < cum) return int32_t(i);
  }
  return last;
}

}  // namespace

RejectionResult rejection_sample(std::span<const float> p, std::span<const float> q, std::span<const int32_t> drafts,
                                 int64_t V, const UniformSource& uniform) {
  const int64_t k = int64_t(drafts.size());
  if (V <= 0 || int64_t(p.size()) != (k + 1) * V || (!q.empty() && int64_t(q.size()) != k * V))
    throw Error("rejection_sample: p must be [" + std::to_string(k + 1) + ", " + std::to_string(V) + "] and q [" +
                std::to_string(k) + ", " + std::to_string(V) + "] or empty; got " + std::to_string(p.size()) + " and " +
                std::to_string(q.size()) + " values");
  RejectionResult r;
  std::vector<double> w(static_cast<size_t>(V));
  for (int64_t j = 0; j < k; ++j) {
    const int32_t d = drafts[size_t(j)];
    if (d < 0 || d >= V) throw Error("rejection_sample: draft " + std::to_string(d) + " is outside the vocabulary");
    const float* pj = p.data() + j * V;
    const float* qj = q.empty() ? nullptr : q.data() + j * V;
    const double pd = pj[d], qd = qj ? qj[d] : 1.0;
    // Accept with probability min(1, p(d) / q(d)): u * q(d) < p(d).
    if (qd > 0 && uniform(j, 0) * qd < pd) {
      r.tokens.push_back(d);
      ++r.num_accepted;
      continue;
    }
    for (int64_t t = 0; t < V; ++t)
      w[size_t(t)] = std::max(0.0, double(pj[t]) - (qj ? double(qj[t]) : (t == d ? 1.0 : 0.0)));
    int32_t t = draw(w, uniform(j, 1));
    if (t < 0) {  // p == q where it has mass (only by rounding): p itself
      for (int64_t i = 0; i < V; ++i) w[size_t(i)] = pj[i];
      t = draw(w, uniform(j, 1));
    }
    r.tokens.push_back(t);
    return r;
  }
  const float* pk = p.data() + k * V;
  for (int64_t i = 0; i < V; ++i) w[size_t(i)] = pk[i];
  r.tokens.push_back(draw(w, uniform(k, 1)));
  return r;
}

}  // namespace nanovllm
