#include "nanovllm/engine/step_cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace nanovllm {

namespace {

// Features are fitted in units that make each O(1) in a typical step, so that the normal
// equations stay well conditioned and one ridge strength suits them all.
constexpr StepCostModel::Vec kScale = {1, 1, 100, 1e3, 1e5, 1e7};
// The prior's weight: a small fraction of one step's evidence, so that it only decides the
// directions no measured step has spanned yet (with no data, the fit is the prior itself).
constexpr double kRidge = 0.01;

}  // namespace

void StepShape::add_chunk(int64_t n, int64_t start) {
  prefill_tokens += n;
  prefill_pairs += double(n) * double(start) + double(n) * double(n + 1) / 2;
}

void StepShape::add_decode(int64_t context_len) {
  ++decode_rows;
  decode_context += double(context_len);
}

StepCostModel::StepCostModel(const Vec& prior, double forgetting)
    : prior_(prior), coef_(prior), forgetting_(forgetting) {}

StepCostModel::Vec StepCostModel::prior_from(double seconds_per_token, double pair_to_token_ratio) {
  // An eager forward and the sampler cost a few hundred microseconds even for one row; a decode
  // row costs about what a prompt token does when the batch is compute-bound (the weights'
  // reads are in c0 then), and reads its context at a small fraction of a pair's compute.
  const double per_pair = seconds_per_token * pair_to_token_ratio;
  return {3e-4, 3e-4, seconds_per_token, seconds_per_token, per_pair, per_pair};
}

StepCostModel::Vec StepCostModel::prior_for(const ModelConfig& m, double measured_seconds_per_token) {
  const double d = double(m.head_dim), hq = double(m.num_attention_heads), hkv = double(m.num_key_value_heads),
               h = double(m.hidden_size);
  const double mlp =
      m.num_experts > 0 ? double(m.num_experts_per_tok * m.moe_intermediate_size) : double(m.intermediate_size);
  // Weights one token multiplies per layer (q/k/v, o, gate/up/down) and the attention flops of
  // one query-key pair per layer (QK' and PV); attention runs at about half the GEMMs' efficiency.
  const double linear = h * (hq + 2 * hkv) * d + hq * d * h + 3 * h * mlp;
  const double ratio = linear > 0 ? 2 * (4 * hq * d) / (2 * linear) : 1e-4;
  const double per_token = measured_seconds_per_token > 0
                               ? measured_seconds_per_token
                               : 2 * linear * double(std::max<int64_t>(1, m.num_hidden_layers)) / 1e12;
  return prior_from(per_token, ratio);
}

StepCostModel::Vec StepCostModel::features(const StepShape& s) {
  return {1.0,
          s.prefill_tokens > 0 ? 1.0 : 0.0,
          double(s.decode_rows),
          double(s.prefill_tokens),
          s.decode_context,
          s.prefill_pairs};
}

double StepCostModel::predict(const StepShape& s) const {
  const Vec x = features(s);
  double t = 0;
  for (int j = 0; j < kFeatures; ++j) t += coef_[j] * x[j];
  return t;
}

void StepCostModel::observe(const StepShape& s, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  Vec x = features(s);
  for (int j = 0; j < kFeatures; ++j) x[j] /= kScale[j];
  for (int i = 0; i < kFeatures; ++i) {
    for (int j = 0; j < kFeatures; ++j) xtx_[i][j] = forgetting_ * xtx_[i][j] + x[i] * x[j];
    xty_[i] = forgetting_ * xty_[i] + x[i] * seconds;
  }
  ++observed_;
  solve();
}

// (X'WX + kRidge I) c' = X'Wy + kRidge c'_prior in scaled units, by Gaussian elimination with
// partial pivoting (the matrix is symmetric positive definite: the ridge term sees to it), over
// the coefficients not pinned at zero; a negative one is pinned and the rest solved again (an
// active-set least squares: clamping alone would leave the others fitted around a wrong value).
void StepCostModel::solve() {
  std::array<bool, kFeatures> free;
  free.fill(true);
  Vec sol{};
  for (int round = 0; round < kFeatures; ++round) {
    std::array<std::array<double, kFeatures + 1>, kFeatures> a{};
    for (int i = 0; i < kFeatures; ++i) {
      for (int j = 0; j < kFeatures; ++j) a[i][j] = free[i] && free[j] ? xtx_[i][j] + (i == j ? kRidge : 0.0) : 0.0;
      a[i][kFeatures] = free[i] ? xty_[i] + kRidge * prior_[i] * kScale[i] : 0.0;
      if (!free[i]) a[i][i] = 1;  // c'_i = 0
    }
    for (int c = 0; c < kFeatures; ++c) {
      int p = c;
      for (int r = c + 1; r < kFeatures; ++r)
        if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
      std::swap(a[c], a[p]);
      for (int r = c + 1; r < kFeatures; ++r) {
        const double f = a[r][c] / a[c][c];
        for (int k = c; k <= kFeatures; ++k) a[r][k] -= f * a[c][k];
      }
    }
    for (int c = kFeatures - 1; c >= 0; --c) {
      double v = a[c][kFeatures];
      for (int k = c + 1; k < kFeatures; ++k) v -= a[c][k] * sol[k];
      sol[c] = v / a[c][c];
    }
    int worst = -1;
    for (int j = 0; j < kFeatures; ++j)
      if (free[j] && sol[j] < 0 && (worst < 0 || sol[j] < sol[worst])) worst = j;
    if (worst < 0) break;
    free[size_t(worst)] = false;
  }
  for (int j = 0; j < kFeatures; ++j) coef_[j] = std::max(0.0, sol[j] / kScale[j]);
}

int64_t StepCostModel::max_chunk(const StepShape& base, int64_t start, double target_s, int64_t limit) const {
  auto fits = [&](int64_t n) {
    StepShape s = base;
    s.add_chunk(n, start);
    return predict(s) <= target_s;
  };
  if (limit <= 0 || !fits(1)) return 0;
  int64_t lo = 1, hi = limit;  // fits(lo); the answer is in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace nanovllm
