// The CPU attention's two task orders (cpu_attention.cpp) give the same bits for a query token:
// key-major (few query tokens per sequence: decode) and head-major (prefill, queries in pairs). A decode token is
// computed inside a batch with a 12-token chunk (head-major), alone, and beside another decode
// (key-major, kv heads split over tasks), for F32, BF16 and FP8 caches, with and without a sliding
// window, on the exact and the fast path (its vector softmax); and both orders against softmax
// attention in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"

using namespace nanovllm;

namespace {

constexpr int64_t Hq = 8, Hkv = 4, D = 40, Wd = (Hq + 2 * Hkv) * D, bs = 16;

struct Seq {
  int32_t ctx, qlen;
  std::vector<int32_t> table;  // its cache blocks
};

AttentionMetadata metadata(const std::vector<const Seq*>& seqs) {
  AttentionMetadata md;
  md.num_seqs = int64_t(seqs.size());
  md.cu_seqlens_q = {0};
  md.cu_seqlens_k = {0};
  for (const Seq* s : seqs) md.max_blocks = std::max<int64_t>(md.max_blocks, int64_t(s->table.size()));
  for (const Seq* s : seqs) {
    for (int64_t i = 0; i < md.max_blocks; ++i)
      md.block_tables.push_back(i < int64_t(s->table.size()) ? s->table[size_t(i)] : -1);
    for (int32_t j = s->ctx - s->qlen; j < s->ctx; ++j)
      md.slot_mapping.push_back(s->table[size_t(j / bs)] * int32_t(bs) + j % int32_t(bs));
    md.cu_seqlens_q.push_back(md.cu_seqlens_q.back() + s->qlen);
    md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + s->ctx);
    md.context_lens.push_back(s->ctx);
    md.max_seqlen_q = std::max(md.max_seqlen_q, s->qlen);
    md.max_seqlen_k = std::max(md.max_seqlen_k, s->ctx);
  }
  md.num_tokens = md.cu_seqlens_q.back();
  return md;
}

// Rows `rows` of qkv as a new [rows.size(), Wd] tensor.
Tensor pick(CpuBackend& be, const Tensor& qkv, const std::vector<int64_t>& rows) {
  Tensor t = be.empty({int64_t(rows.size()), Wd}, DType::F32);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(qkv.data<float>() + rows[i] * Wd, Wd, t.data<float>() + int64_t(i) * Wd);
  return t;
}

void check_orders(DType cache_dtype, int64_t window, CpuPrecision precision) {
  SCOPED_TRACE(std::string(dtype_name(cache_dtype)) + " window " + std::to_string(window) +
               (precision == CpuPrecision::Fast ? " fast" : " exact"));
  CpuBackend be(2, precision);
  // A decode at 37 keys, a 12-token chunk ending at 50, a decode at 18 (block tables shuffled).
  std::vector<Seq> seqs = {{37, 1, {}}, {50, 12, {}}, {18, 1, {}}};
  std::vector<int32_t> pool(12);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(3));
  size_t next = 0;
  for (auto& s : seqs)
    for (int32_t b = 0; b < (s.ctx + bs - 1) / bs; ++b) s.table.push_back(pool[next++]);
  Tensor kc = be.empty({12, bs, Hkv, D}, cache_dtype), vc = be.empty({12, bs, Hkv, D}, cache_dtype);
  const KVScales scales = cache_dtype == DType::F8E4M3 ? KVScales{0.01f, 0.02f} : KVScales{};
  // Fill every cached position (not only the new tokens) through store_kvcache: a prefill of all.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<Seq> whole = seqs;
  for (auto& s : whole) s.qlen = s.ctx;
  const AttentionMetadata fill_md = metadata({&whole[0], &whole[1], &whole[2]});
  Tensor all = be.empty({fill_md.num_tokens, Wd}, DType::F32);
  for (int64_t i = 0; i < all.numel(); ++i) all.data<float>()[i] = u(rng);
  be.store_kvcache(all, kc, vc, Hq, Hkv, D, fill_md, scales);
  // The query rows: the last qlen tokens of each sequence in `all`.
  std::vector<int64_t> rows;
  for (size_t b = 0; b < seqs.size(); ++b)
    for (int32_t i = seqs[b].ctx - seqs[b].qlen; i < seqs[b].ctx; ++i) rows.push_back(fill_md.cu_seqlens_q[b] + i);
  const float scale = 0.3f;
  auto run = [&](const std::vector<const Seq*>& batch, const std::vector<int64_t>& qrows) {
    Tensor qkv = pick(be, all, qrows), out = be.empty({int64_t(qrows.size()), Hq * D}, DType::F32);
    be.attention(qkv, kc, vc, out, Hq, Hkv, D, scale, metadata(batch), window, scales);
    return out;
  };
  const Tensor mixed = run({&seqs[0], &seqs[1], &seqs[2]}, rows);  // 14 tokens of 3 sequences: head-major
  Seq last_of_chunk{50, 1, seqs[1].table};
  const Tensor alone = run({&seqs[0]}, {rows[0]});                     // key-major, kv heads split
  const Tensor pair = run({&seqs[0], &seqs[2]}, {rows[0], rows[13]});  // key-major, two decodes
  const Tensor chunk_end = run({&last_of_chunk}, {rows[12]});          // the chunk's last query alone
  auto same = [&](const Tensor& a, int64_t ra, const Tensor& b, int64_t rb, const char* what) {
    int64_t diff = 0;
    for (int64_t i = 0; i < Hq * D; ++i) diff += a.data<float>()[ra * Hq * D + i] != b.data<float>()[rb * Hq * D + i];
    EXPECT_EQ(diff, 0) << what;
  };
  same(mixed, 0, alone, 0, "decode in a prefill batch vs alone");
  same(mixed, 0, pair, 0, "decode in a prefill batch vs beside another decode");
  same(mixed, 13, pair, 1, "second decode");
  same(mixed, 12, chunk_end, 0, "a chunk's last query vs the same query alone");
  // Every query of the chunk (paired with its neighbour in the head-major order, or not) alone.
  for (int32_t i = 0; i < 12; ++i) {
    Seq prefix{38 + i + 1, 1, seqs[1].table};
    same(mixed, 1 + i, run({&prefix}, {rows[size_t(1 + i)]}), 0, ("chunk query " + std::to_string(i)).c_str());
  }
  // Both orders against softmax in double over the cache's stored values (as attention reads them).
  std::vector<float> kf(size_t(kc.numel())), vf(size_t(vc.numel()));
  const std::vector<float> kd = be.to_host_f32(kc), vd = be.to_host_f32(vc);
  for (size_t i = 0; i < kf.size(); ++i) kf[i] = kd[i] * scales.k, vf[i] = vd[i] * scales.v;
  for (auto [out, row, seq] : {std::tuple{&alone, int64_t(0), &seqs[0]}, {&mixed, int64_t(12), &last_of_chunk}}) {
    const float* q0 = all.data<float>() + (row == 0 ? rows[0] : rows[12]) * Wd;
    const int64_t pos = seq->ctx - 1, first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < Hq; ++h) {
      auto at = [&](const std::vector<float>& c, int64_t j) {
        return c.data() + (int64_t(seq->table[size_t(j / bs)]) * bs + j % bs) * Hkv * D + (h / (Hq / Hkv)) * D;
      };
      std::vector<double> s;
      double m = -INFINITY, denom = 0;
      for (int64_t j = first; j <= pos; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(q0[h * D + d]) * at(kf, j)[d];
        s.push_back(dot * scale);
        m = std::max(m, s.back());
      }
      for (double& x : s) denom += (x = std::exp(x - m));
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t j = first; j <= pos; ++j) o += s[size_t(j - first)] / denom * at(vf, j)[d];
        EXPECT_NEAR(out->data<float>()[row * Hq * D + h * D + d], o, 1e-4) << "head " << h << " dim " << d;
      }
    }
  }
}

}  // namespace

TEST(CpuAttentionOrders, KeyMajorEqualsHeadMajorBitForBit) {
  for (DType dt : {DType::F32, DType::BF16, DType::F8E4M3})
    for (int64_t window : {int64_t(0), int64_t(7)})
      for (CpuPrecision p : {CpuPrecision::Exact, CpuPrecision::Fast}) check_orders(dt, window, p);
}
