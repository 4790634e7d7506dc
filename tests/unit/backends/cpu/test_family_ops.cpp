// The CPU ops the Llama-style families add: the bias add (Qwen2's q/k/v), RoPE without the q/k
// norm (Llama, Qwen2, Mistral) and sliding-window paged attention (Mistral), each against a plain
// double-precision reference written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

Tensor filled(CpuBackend& be, const Shape& shape, uint32_t seed, float lo = -1, float hi = 1) {
  Tensor t = be.empty(shape, DType::F32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

}  // namespace

TEST(FamilyOps, AddBiasAddsToEveryRow) {
  CpuBackend be(1);
  Tensor x = filled(be, {3, 5}, 1), bias = filled(be, {5}, 2);
  const auto before = values(x);
  be.add_bias(x, bias);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t n = 0; n < 5; ++n)
      EXPECT_EQ(x.data<float>()[t * 5 + n], before[size_t(t * 5 + n)] + bias.data<float>()[n]);
  Tensor wrong = be.empty({4}, DType::F32);
  EXPECT_THROW(be.add_bias(x, wrong), Error);
}

// Without norm weights the op is RoPE alone: rotate-half of each q and k head, v untouched.
TEST(FamilyOps, RopeWithoutQkNorm) {
  CpuBackend be(1);
  const int64_t T = 3, Hq = 3, Hkv = 1, D = 8, W = (Hq + 2 * Hkv) * D;
  Tensor qkv = filled(be, {T, W}, 3);
  const auto x = values(qkv);
  Tensor pos = be.empty({T}, DType::I32);
  const int32_t positions[] = {0, 7, 300};
  std::copy_n(positions, T, pos.data<int32_t>());
  const RopeParams rope = RopeParams::plain(D, 10000);
  be.qk_norm_rope(qkv, Tensor(), Tensor(), pos, Hq, Hkv, D, 1e-6f, rope);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq + 2 * Hkv; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const size_t a = size_t(t * W + h * D + i), b = a + size_t(D / 2);
        double wa = x[a], wb = x[b];
        if (h < Hq + Hkv) {  // q and k heads rotate; v heads stay
          const double angle = double(float(positions[t]) * rope.inv_freq[size_t(i)]);
          wa = x[a] * std::cos(angle) - x[b] * std::sin(angle);
          wb = x[b] * std::cos(angle) + x[a] * std::sin(angle);
        }
        EXPECT_NEAR(qkv.data<float>()[a], wa, 1e-5) << t << " " << h << " " << i;
        EXPECT_NEAR(qkv.data<float>()[b], wb, 1e-5) << t << " " << h << " " << i;
      }
  Tensor w = filled(be, {D}, 4);
  EXPECT_THROW(be.qk_norm_rope(qkv, w, Tensor(), pos, Hq, Hkv, D, 1e-6f, rope), Error);  // one norm only
}

namespace {

struct Seq {
  int32_t ctx, qlen;  // keys in the context, new tokens (the last qlen of them)
};

// Paged attention with a sliding window against softmax over the last `window` keys in double:
// sequences mixing a chunk whose first queries see the whole context with later ones that slide,
// a decode longer than the window and a short one it does not reach; shuffled block tables.
void check_window(const std::vector<Seq>& seqs, int64_t window, int64_t bs, uint32_t seed) {
  CpuBackend be(2);
  const int64_t Hq = 4, Hkv = 2, D = 16, G = Hq / Hkv, W = (Hq + 2 * Hkv) * D, row = Hkv * D;
  int64_t T = 0, nblocks = 0, max_blocks = 0;
  for (auto& s : seqs) {
    T += s.qlen;
    nblocks += (s.ctx + bs - 1) / bs;
    max_blocks = std::max<int64_t>(max_blocks, (s.ctx + bs - 1) / bs);
  }
  std::vector<int32_t> pool(size_t(nblocks + 2));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  Tensor kc = filled(be, {nblocks + 2, bs, Hkv, D}, seed + 1), vc = filled(be, {nblocks + 2, bs, Hkv, D}, seed + 2);
  Tensor qkv = filled(be, {T, W}, seed + 3, -2, 2);
  AttentionMetadata md;
  md.num_seqs = int64_t(seqs.size());
  md.num_tokens = T;
  md.max_blocks = max_blocks;
  md.is_prefill = true;
  md.cu_seqlens_q = {0};
  md.cu_seqlens_k = {0};
  size_t next = 0;
  std::vector<std::vector<int32_t>> tables;
  for (auto& s : seqs) {
    const int64_t nb = (s.ctx + bs - 1) / bs;
    tables.emplace_back(pool.begin() + int64_t(next), pool.begin() + int64_t(next) + nb);
    next += size_t(nb);
    for (int64_t i = 0; i < max_blocks; ++i) md.block_tables.push_back(i < nb ? tables.back()[size_t(i)] : -1);
    for (int32_t j = s.ctx - s.qlen; j < s.ctx; ++j)
      md.slot_mapping.push_back(tables.back()[size_t(j / bs)] * int32_t(bs) + j % int32_t(bs));
    md.cu_seqlens_q.push_back(md.cu_seqlens_q.back() + s.qlen);
    md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + s.ctx);
    md.context_lens.push_back(s.ctx);
    md.max_seqlen_q = std::max(md.max_seqlen_q, s.qlen);
    md.max_seqlen_k = std::max(md.max_seqlen_k, s.ctx);
  }
  be.store_kvcache(qkv, kc, vc, Hq, Hkv, D, md);
  Tensor out = be.empty({T, Hq * D}, DType::F32), full = be.empty({T, Hq * D}, DType::F32);
  const float scale = 0.25f;
  be.attention(qkv, kc, vc, out, Hq, Hkv, D, scale, md, window);
  be.attention(qkv, kc, vc, full, Hq, Hkv, D, scale, md, 0);
  int64_t t = 0, slid = 0;
  for (size_t b = 0; b < seqs.size(); ++b)
    for (int32_t i = 0; i < seqs[b].qlen; ++i, ++t) {
      const int64_t pos = seqs[b].ctx - seqs[b].qlen + i, first = std::max<int64_t>(0, pos - window + 1);
      slid += first > 0;
      for (int64_t h = 0; h < Hq; ++h) {
        const float* q = qkv.data<float>() + t * W + h * D;
        auto key = [&](const Tensor& c, int64_t j) {
          const int64_t slot = int64_t(tables[b][size_t(j / bs)]) * bs + j % bs;
          return c.data<float>() + slot * row + (h / G) * D;
        };
        std::vector<double> s;
        double m = -INFINITY, denom = 0;
        for (int64_t j = first; j <= pos; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(q[d]) * key(kc, j)[d];
          s.push_back(dot * scale);
          m = std::max(m, s.back());
        }
        for (double& x : s) denom += (x = std::exp(x - m));
        double max_diff_full = 0;
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = first; j <= pos; ++j) o += s[size_t(j - first)] / denom * key(vc, j)[d];
          const float got = out.data<float>()[t * Hq * D + h * D + d];
          EXPECT_NEAR(got, o, 1e-5) << "seq " << b << " query " << i << " head " << h << " dim " << d;
          max_diff_full = std::max(max_diff_full, std::abs(double(full.data<float>()[t * Hq * D + h * D + d]) - o));
        }
        if (first == 0)
          EXPECT_LT(max_diff_full, 1e-5);  // the window does not reach back: same as full attention
        else
          EXPECT_GT(max_diff_full, 1e-4);  // it does: full attention differs
      }
    }
  EXPECT_GT(slid, 0);
}

}  // namespace

TEST(FamilyOps, SlidingWindowAttentionReadsTheLastWindowKeys) {
  // Prefill chunks (with cached keys before them), a decode past the window, one within it.
  check_window({{40, 30}, {70, 1}, {9, 1}, {23, 23}}, 16, 4, 7);
  check_window({{40, 30}, {70, 1}, {9, 1}}, 1, 16, 8);     // window 1: each query reads itself
  check_window({{100, 60}, {48, 1}}, 48, 16, 9);           // the window a whole number of blocks
  EXPECT_THROW(check_window({{4, 4}}, -1, 4, 10), Error);  // a negative window is refused
}
