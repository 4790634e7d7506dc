// CUDA ops against the CPU reference at awkward sizes. BF16 tolerances: inputs are BF16-rounded
// for both backends, so the difference is the GPU's BF16 output rounding (2^-9 relative) plus
// FP32 accumulation order: rel_l2 < 1e-2 throughout.
#include "gpu_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "nanovllm/backends/checks.h"
#include "nanovllm/layers/rotary_embedding.h"

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

TEST(CudaOps, EmbeddingAndGatherRowsExact) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t H : {64, 100}) {
    const int64_t V = 37, T = 17;
    auto table = make_pair(be.cpu, be.gpu, {V, H}, rand_bf16(size_t(V * H), 1));
    std::vector<int32_t> ids(T);
    for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t((t * 7 + 3) % V);
    auto id = make_i32(be.cpu, be.gpu, ids);
    Pair out{be.cpu.empty({T, H}, DType::F32), be.gpu.empty({T, H}, DType::BF16)};
    be.cpu.embedding(id.cpu, table.cpu, out.cpu, 0);
    be.gpu.embedding(id.gpu, table.gpu, out.gpu, 0);
    EXPECT_EQ(be.gpu.to_host_f32(out.gpu), be.cpu.to_host_f32(out.cpu)) << "embedding H=" << H;
    std::vector<int32_t> rows{16, 0, 5, 5, 3};
    Pair g{be.cpu.empty({5, H}, DType::F32), be.gpu.empty({5, H}, DType::BF16)};
    be.cpu.gather_rows(out.cpu, rows, g.cpu);
    be.gpu.gather_rows(out.gpu, rows, g.gpu);
    EXPECT_EQ(be.gpu.to_host_f32(g.gpu), be.cpu.to_host_f32(g.cpu)) << "gather H=" << H;
  }
}

TEST(CudaOps, RmsNormAndFusedAdd) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t H : {1024, 100, 4096}) {
    for (int64_t T : {1, 17}) {
      auto x = make_pair(be.cpu, be.gpu, {T, H}, rand_bf16(size_t(T * H), 2, -3, 3));
      auto w = make_pair(be.cpu, be.gpu, {H}, rand_bf16(size_t(H), 3, 0.5, 1.5));
      Pair out{be.cpu.empty({T, H}, DType::F32), be.gpu.empty({T, H}, DType::BF16)};
      be.cpu.rms_norm(x.cpu, w.cpu, 1e-6f, out.cpu);
      be.gpu.rms_norm(x.gpu, w.gpu, 1e-6f, out.gpu);
      const std::string tag = " H=" + std::to_string(H) + " T=" + std::to_string(T);
      expect_close("rms_norm" + tag, be.gpu.to_host_f32(out.gpu), be.cpu.to_host_f32(out.cpu), 1e-2, 3e-2);
      auto r = make_pair(be.cpu, be.gpu, {T, H}, rand_bf16(size_t(T * H), 4, -3, 3));
      be.cpu.add_rms_norm(x.cpu, r.cpu, w.cpu, 1e-6f);
      be.gpu.add_rms_norm(x.gpu, r.gpu, w.gpu, 1e-6f);
      expect_close("add_rms_norm residual" + tag, be.gpu.to_host_f32(r.gpu), be.cpu.to_host_f32(r.cpu), 1e-2, 5e-2);
      expect_close("add_rms_norm out" + tag, be.gpu.to_host_f32(x.gpu), be.cpu.to_host_f32(x.cpu), 1e-2, 5e-2);
    }
  }
}

TEST(CudaOps, Linear) {
  REQUIRE_GPU();
  Backends be;
  // T <= 4 with K % 8 == 0 takes the skinny kernel (gemv.cu): N not a multiple of its 4 rows per
  // CTA (2 at T = 1: gemv_shape; N odd), K not a multiple of its 128-chunk stride (one to three
  // rounds of 2 chunks a thread, the last partial or whole); K % 8 != 0 and T = 5 take cuBLASLt.
  for (auto [T, K, N] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 256, 384},
                                                                           {1, 1024, 151},
                                                                           {1, 1000, 1003},
                                                                           {1, 2056, 33},
                                                                           {1, 3072, 1024},
                                                                           {1, 3000, 77},
                                                                           {1, 4096, 130},
                                                                           {2, 1032, 1001},
                                                                           {3, 3072, 77},
                                                                           {4, 2056, 4099},
                                                                           {1, 100, 50},
                                                                           {5, 1024, 512},
                                                                           {17, 1024, 3072},
                                                                           {300, 96, 700},
                                                                           {4097, 128, 64}}) {
    auto x = make_pair(be.cpu, be.gpu, {T, K}, rand_bf16(size_t(T * K), 5));
    auto w = make_pair(be.cpu, be.gpu, {N, K}, rand_bf16(size_t(N * K), 6, -0.1f, 0.1f));
    Pair out{be.cpu.empty({T, N}, DType::F32), be.gpu.empty({T, N}, DType::BF16)};
    be.cpu.linear(x.cpu, w.cpu, out.cpu);
    be.gpu.linear(x.gpu, w.gpu, out.gpu);
    expect_close("linear T=" + std::to_string(T) + " K=" + std::to_string(K) + " N=" + std::to_string(N),
                 be.gpu.to_host_f32(out.gpu), be.cpu.to_host_f32(out.cpu), 1e-2, 5e-2);
  }
}

TEST(CudaOps, SiluAndMul) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t I : {160, 100, 3072}) {
    const int64_t T = 17;
    auto x = make_pair(be.cpu, be.gpu, {T, 2 * I}, rand_bf16(size_t(T * 2 * I), 7, -4, 4));
    Pair out{be.cpu.empty({T, I}, DType::F32), be.gpu.empty({T, I}, DType::BF16)};
    be.cpu.silu_and_mul(x.cpu, out.cpu);
    be.gpu.silu_and_mul(x.gpu, out.gpu);
    // Two BF16 roundings (silu(gate), then the product: as a BF16 Hugging Face model rounds) on
    // outputs up to |4 * silu(4)| = 15.7: at most 2^-9 * (3.93 * 4 + 15.7) = 0.062 from FP32.
    expect_close("silu_and_mul I=" + std::to_string(I), be.gpu.to_host_f32(out.gpu), be.cpu.to_host_f32(out.cpu), 1e-2,
                 8e-2);
  }
}

TEST(CudaOps, QkNormRope) {
  REQUIRE_GPU();
  Backends be;
  struct Cfg {
    int64_t hq, hkv, d;
    float theta;
  };
  // T = 300: one CTA per token, each warp walking several heads (40 heads over 8 warps: 5 each).
  for (auto c : {Cfg{16, 8, 128, 1e6f}, Cfg{4, 2, 32, 1e6f}, Cfg{6, 2, 24, 1e4f}, Cfg{4, 2, 64, 1e4f},
                 Cfg{32, 8, 128, 1e6f}, Cfg{32, 8, 256, 1e6f}})
    for (int64_t T : {int64_t(17), int64_t(300)}) {
      const int64_t W = (c.hq + 2 * c.hkv) * c.d;
      auto qkv = make_pair(be.cpu, be.gpu, {T, W}, rand_bf16(size_t(T * W), 8, -2, 2));
      auto qw = make_pair(be.cpu, be.gpu, {c.d}, rand_bf16(size_t(c.d), 9, 0.5, 1.5));
      auto kw = make_pair(be.cpu, be.gpu, {c.d}, rand_bf16(size_t(c.d), 10, 0.5, 1.5));
      std::vector<int32_t> pos(T);
      for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t == 0 ? 0 : (t * 977) % 40000);
      auto p = make_i32(be.cpu, be.gpu, pos);
      be.cpu.qk_norm_rope(qkv.cpu, qw.cpu, kw.cpu, p.cpu, c.hq, c.hkv, c.d, 1e-6f, c.theta);
      be.gpu.qk_norm_rope(qkv.gpu, qw.gpu, kw.gpu, p.gpu, c.hq, c.hkv, c.d, 1e-6f, c.theta);
      expect_close("qk_norm_rope D=" + std::to_string(c.d) + " T=" + std::to_string(T), be.gpu.to_host_f32(qkv.gpu),
                   be.cpu.to_host_f32(qkv.cpu), 1e-2, 5e-2);
    }
}

// Qwen2's q/k/v bias add, and RoPE without the q/k norm (Llama, Qwen2, Mistral), fused with the
// cache store as the models call it.
TEST(CudaOps, AddBiasAndRopeWithoutNorm) {
  REQUIRE_GPU();
  Backends be;
  for (auto [T, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1152}, {17, 100}, {300, 4608}}) {
    auto x = make_pair(be.cpu, be.gpu, {T, N}, rand_bf16(size_t(T * N), 41, -2, 2));
    auto b = make_pair(be.cpu, be.gpu, {N}, rand_bf16(size_t(N), 42, -2, 2));
    be.cpu.add_bias(x.cpu, b.cpu);
    be.gpu.add_bias(x.gpu, b.gpu);
    expect_close("add_bias T=" + std::to_string(T) + " N=" + std::to_string(N), be.gpu.to_host_f32(x.gpu),
                 be.cpu.to_host_f32(x.cpu), 1e-2, 3e-2);
  }
  struct Cfg {
    int64_t hq, hkv, d;
  };
  for (auto c : {Cfg{32, 8, 128}, Cfg{14, 2, 64}, Cfg{9, 3, 16}, Cfg{6, 2, 32}}) {
    const int64_t T = 17, W = (c.hq + 2 * c.hkv) * c.d, bs = 16, nb = 4;
    auto qkv = make_pair(be.cpu, be.gpu, {T, W}, rand_bf16(size_t(T * W), 43, -2, 2));
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t((t * 977) % 40000);
    auto p = make_i32(be.cpu, be.gpu, pos);
    RopeScaling s;
    s.type = "llama3", s.factor = 8, s.original_max_position_embeddings = 64;
    const RopeParams rope = llama3_rope(c.d, 500000, s);
    const Shape cs{nb, bs, c.hkv, c.d};
    auto kc = make_pair(be.cpu, be.gpu, cs, std::vector<float>(size_t(nb * bs * c.hkv * c.d), 0.f));
    auto vc = make_pair(be.cpu, be.gpu, cs, std::vector<float>(size_t(nb * bs * c.hkv * c.d), 0.f));
    AttentionMetadata md;
    md.num_seqs = 1, md.num_tokens = T, md.max_blocks = nb, md.is_prefill = true;
    md.cu_seqlens_q = {0, int32_t(T)}, md.cu_seqlens_k = {0, int32_t(T)}, md.context_lens = {int32_t(T)};
    md.block_tables = {3, 1, 0, 2};
    for (int32_t t = 0; t < T; ++t)
      md.slot_mapping.push_back(md.block_tables[size_t(t / bs)] * int32_t(bs) + t % int32_t(bs));
    md.max_seqlen_q = md.max_seqlen_k = int32_t(T);
    be.gpu.prepare_metadata(md);
    be.cpu.qk_norm_rope_store(qkv.cpu, Tensor(), Tensor(), p.cpu, kc.cpu, vc.cpu, c.hq, c.hkv, c.d, 1e-6f, rope, md);
    be.gpu.qk_norm_rope_store(qkv.gpu, Tensor(), Tensor(), p.gpu, kc.gpu, vc.gpu, c.hq, c.hkv, c.d, 1e-6f, rope, md);
    const std::string tag = " D=" + std::to_string(c.d);
    expect_close("rope (no norm)" + tag, be.gpu.to_host_f32(qkv.gpu), be.cpu.to_host_f32(qkv.cpu), 1e-2, 5e-2);
    expect_close("rope (no norm) k cache" + tag, be.gpu.to_host_f32(kc.gpu), be.cpu.to_host_f32(kc.cpu), 1e-2, 5e-2);
    EXPECT_EQ(be.gpu.to_host_f32(vc.gpu), be.cpu.to_host_f32(vc.cpu)) << "v cache" << tag;
  }
}

// ---------------------------------------------------------------- paged attention

// Builds a batch over shuffled blocks, fills the cached part of each sequence's keys/values
// directly, stores the new tokens' k/v through store_kvcache and compares attention outputs
// (window > 0: sliding-window attention).
void run_attention_case(Backends& be, const std::string& name, const std::vector<SeqSpec>& seqs, int64_t hq,
                        int64_t hkv, int64_t D, int64_t bs, bool is_prefill, uint32_t seed, int64_t window = 0) {
  PagedBatch pb = paged_batch(seqs, bs, is_prefill, seed);
  AttentionMetadata& md = pb.md;
  const int64_t nblocks = pb.nblocks, T = md.num_tokens, row = hkv * D;
  std::vector<float> kc(size_t(nblocks * bs * row), 0.f), vc(kc.size(), 0.f);
  auto kvals = rand_bf16(kc.size(), seed + 1), vvals = rand_bf16(kc.size(), seed + 2);
  for (int64_t slot : pb.cached_slots) {  // cached keys: written directly
    std::copy_n(kvals.begin() + slot * row, row, kc.begin() + slot * row);
    std::copy_n(vvals.begin() + slot * row, row, vc.begin() + slot * row);
  }
  const int64_t W = (hq + 2 * hkv) * D;
  Shape cs{nblocks, bs, hkv, D};
  auto k = make_pair(be.cpu, be.gpu, cs, kc), v = make_pair(be.cpu, be.gpu, cs, vc);
  auto qkv = make_pair(be.cpu, be.gpu, {T, W}, rand_bf16(size_t(T * W), seed + 3, -2, 2));
  be.gpu.prepare_metadata(md);
  const float scale = float(1.0 / std::sqrt(double(D)));
  be.gpu.store_kvcache(qkv.gpu, k.gpu, v.gpu, hq, hkv, D, md);
  Pair out{be.cpu.empty({T, hq * D}, DType::F32), be.gpu.empty({T, hq * D}, DType::BF16)};
  be.gpu.attention(qkv.gpu, k.gpu, v.gpu, out.gpu, hq, hkv, D, scale, md, window);
  // The CPU reference of these inputs (k cache, v cache, output), computed once per test.
  std::string key = std::to_string(hq) + "/" + std::to_string(hkv) + "/" + std::to_string(D) + "/" +
                    std::to_string(bs) + "/" + std::to_string(is_prefill) + "/" + std::to_string(seed) + "/" +
                    std::to_string(window);
  for (const SeqSpec& s : seqs) key += "/" + std::to_string(s.ctx) + ":" + std::to_string(s.qlen);
  const auto& ref = cpu_reference(be, key, [&] {
    be.cpu.store_kvcache(qkv.cpu, k.cpu, v.cpu, hq, hkv, D, md);
    be.cpu.attention(qkv.cpu, k.cpu, v.cpu, out.cpu, hq, hkv, D, scale, md, window);
    return std::vector<std::vector<float>>{be.cpu.to_host_f32(k.cpu), be.cpu.to_host_f32(v.cpu),
                                           be.cpu.to_host_f32(out.cpu)};
  });
  EXPECT_EQ(be.gpu.to_host_f32(k.gpu), ref[0]) << name << ": k cache";
  EXPECT_EQ(be.gpu.to_host_f32(v.gpu), ref[1]) << name << ": v cache";
  expect_close(name, be.gpu.to_host_f32(out.gpu), ref[2], 1e-2, 3e-2);
  if (!is_prefill) {  // the read-ahead hint (at batch <= 4, the merge kernel prefetches it) changes nothing
    ReadAhead then;
    then.tensors = {&k.gpu, &qkv.gpu, &v.gpu, nullptr};
    Tensor hinted = be.gpu.empty({T, hq * D}, DType::BF16);
    be.gpu.attention(qkv.gpu, k.gpu, v.gpu, hinted, hq, hkv, D, scale, md, window, {}, then);
    EXPECT_EQ(be.gpu.to_host_f32(hinted), be.gpu.to_host_f32(out.gpu)) << name << ": with a read-ahead hint";
  }
}

struct HeadCfg {
  int64_t hq, hkv, d;
};
const HeadCfg kHeads[] = {{16, 8, 128}, {4, 2, 32}, {4, 2, 64}, {6, 2, 24}, {8, 1, 128}, {4, 4, 64}};

std::string cfg_name(const char* what, const HeadCfg& h, int64_t bs) {
  return std::string(what) + " " + std::to_string(h.hq) + "/" + std::to_string(h.hkv) + "x" + std::to_string(h.d) +
         " bs" + std::to_string(bs);
}

TEST(CudaAttention, PrefillFresh) {
  REQUIRE_GPU();
  Backends be;
  for (auto& h : kHeads)
    for (int64_t bs : {16, 256})
      for (int32_t len : {1, 97, 255, 256, 257})
        run_attention_case(be, cfg_name("prefill", h, bs) + " len " + std::to_string(len), {{len, len}}, h.hq, h.hkv,
                           h.d, bs, true, uint32_t(len));
}

TEST(CudaAttention, PrefillBatchWithPrefixHitsAndChunks) {
  REQUIRE_GPU();
  Backends be;
  // ctx > qlen: cached prefix (prefix-cache hit or earlier chunk) read from the cache.
  const std::vector<SeqSpec> seqs{{300, 44}, {97, 97}, {257, 1}, {256, 128}, {1, 1}, {4097, 1000}, {255, 200}};
  for (auto& h : kHeads)
    for (int64_t bs : {16, 256})
      run_attention_case(be, cfg_name("prefill-mixed", h, bs), seqs, h.hq, h.hkv, h.d, bs, true, 11);
}

// The tensor-core prefill kernels (head dims 64/128; TMA + wgmma on an H100, mma.sync elsewhere) at the
// issue's awkward shapes: prompts around their 64/128-row and 64-key tiles, a prompt of 4,097, prefix
// hits and chunk starts mid-block, GQA groups 1, 2, 4, 5 (64 rows are 12 tokens of 5 heads plus 4
// padding rows), 8 and 64. The mixed batch is also forced through mma.sync (16 and 32 rows per
// warp) and the CUDA-core kernel, which must agree with the same CPU reference.
TEST(CudaAttention, PrefillTensorCoreAwkwardShapes) {
  REQUIRE_GPU();
  Backends be;
  const HeadCfg heads[] = {{4, 4, 128}, {16, 8, 128}, {16, 4, 128}, {40, 8, 128},
                           {8, 1, 128}, {4, 4, 64},   {8, 4, 64},   {64, 1, 64}};
  for (auto& h : heads)
    for (int64_t bs : {16, 256}) {
      for (int32_t len : {1, 63, 64, 65, 255, 4097}) {
        if (len == 4097 && bs == 256) continue;  // once is enough for the CPU reference's time
        run_attention_case(be, cfg_name("prefill-tc", h, bs) + " len " + std::to_string(len), {{len, len}}, h.hq, h.hkv,
                           h.d, bs, true, uint32_t(len + bs));
      }
      // ctx - qlen cached keys: prefix hits / earlier chunks ending mid-block (bs 16: 9, 3, 12 ...).
      const std::vector<SeqSpec> mixed{{4097, 1000}, {1000, 333}, {130, 65}, {64, 63}, {77, 1}, {300, 44}, {65, 64}};
      run_attention_case(be, cfg_name("prefill-tc-mixed", h, bs), mixed, h.hq, h.hkv, h.d, bs, true, 31);
      if (be.gpu.wgmma()) {  // auto took the TMA kernel (block sizes 16 and 256): its wgmma sibling too
        be.gpu.set_prefill_attention(PrefillAttention::Wgmma);
        for (int32_t len : {1, 65, 4097})
          run_attention_case(be, cfg_name("prefill-wgmma", h, bs) + " len " + std::to_string(len), {{len, len}}, h.hq,
                             h.hkv, h.d, bs, true, uint32_t(len + bs));
        run_attention_case(be, cfg_name("prefill-wgmma-mixed", h, bs), mixed, h.hq, h.hkv, h.d, bs, true, 31);
      }
      be.gpu.set_prefill_attention(PrefillAttention::Mma);
      for (int rows : {16, 32}) {
        be.gpu.set_prefill_rows_per_warp(rows);
        run_attention_case(be, cfg_name("prefill-mma", h, bs) + " rows/warp " + std::to_string(rows), mixed, h.hq,
                           h.hkv, h.d, bs, true, 31);
      }
      be.gpu.set_prefill_rows_per_warp(32);
      if (h.hq / h.hkv <= 16) {
        be.gpu.set_prefill_attention(PrefillAttention::Tiled);
        run_attention_case(be, cfg_name("prefill-tiled-mixed", h, bs), mixed, h.hq, h.hkv, h.d, bs, true, 31);
      }
      be.gpu.set_prefill_attention(PrefillAttention::Auto);
    }
  // Block sizes whose TMA boxes are smaller than the 128-key tile and whose tiles cross blocks
  // (48: boxes of 16 rows; 192: boxes of 64), mid-block prefix hits included.
  const HeadCfg h{16, 8, 128};
  for (int64_t bs : {48, 192})
    run_attention_case(be, cfg_name("prefill-tc-mixed", h, bs),
                       {{4097, 1000}, {1000, 333}, {130, 65}, {77, 1}, {300, 44}, {65, 64}}, h.hq, h.hkv, h.d, bs, true,
                       37);
}

// The TMA kernel's persistent grid (one CTA an SM walking the work items, its K/V ring and Q tile
// running on from one item into the next) against one CTA an item: the same products in the same
// order, so the same bits. A batch of many short prompts (the embedding workload: ~15 items a CTA,
// causal tiles of 1-4 key tiles), and one with prefix hits and sequences shorter than the longest
// (empty items inside a CTA's rounds), at GQA groups 2, 8 and 1, head dims 128 and 64.
TEST(CudaAttention, PrefillPersistentGridEqualsOneCtaAnItem) {
  REQUIRE_GPU();
  Backends be;
  if (!be.gpu.wgmma()) GTEST_SKIP() << "the TMA kernel needs sm_90a";
  std::vector<SeqSpec> short_prompts;
  for (int32_t i = 0; i < 40; ++i) short_prompts.push_back({500 + (i * 37) % 24, 500 + (i * 37) % 24});
  std::vector<SeqSpec> mixed{{4097, 1000}, {1000, 333}, {130, 65}, {77, 1}, {300, 44}, {65, 64}};
  for (int32_t i = 0; i < 30; ++i) mixed.push_back({64 + i * 29, 1 + (i * 53) % 64});
  const HeadCfg heads[] = {{16, 8, 128}, {8, 1, 128}, {4, 4, 64}};
  for (const auto& h : heads)
    for (const auto* seqs : {&short_prompts, &mixed}) {
      PagedBatch pb = paged_batch(*seqs, 16, true, 61);
      AttentionMetadata& md = pb.md;
      const int64_t T = md.num_tokens, W = (h.hq + 2 * h.hkv) * h.d;
      const Shape cs{pb.nblocks, 16, h.hkv, h.d};
      const size_t cache = size_t(pb.nblocks * 16 * h.hkv * h.d);
      Tensor qkv = be.gpu.empty({T, W}, DType::BF16), k = be.gpu.empty(cs, DType::BF16),
             v = be.gpu.empty(cs, DType::BF16);
      be.gpu.upload(rand_bf16(size_t(T * W), 62, -2, 2).data(), DType::F32, qkv);
      be.gpu.upload(rand_bf16(cache, 63).data(), DType::F32, k);
      be.gpu.upload(rand_bf16(cache, 64).data(), DType::F32, v);
      be.gpu.prepare_metadata(md);
      const float scale = float(1.0 / std::sqrt(double(h.d)));
      auto run = [&](bool persistent) {
        be.gpu.set_prefill_attention_persistent(persistent);
        Tensor out = be.gpu.empty({T, h.hq * h.d}, DType::BF16);
        be.gpu.attention(qkv, k, v, out, h.hq, h.hkv, h.d, scale, md);
        return be.gpu.to_host_f32(out);
      };
      const auto one_a_cta = run(false), persistent = run(true);
      be.gpu.set_prefill_attention_persistent(true);
      size_t differ = 0, nonfinite = 0;
      for (size_t i = 0; i < persistent.size(); ++i) {
        differ += !(persistent[i] == one_a_cta[i]);
        nonfinite += !std::isfinite(persistent[i]);
      }
      const std::string name = cfg_name(seqs == &mixed ? "mixed" : "short prompts", h, 16);
      EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << persistent.size() << " differ";
      EXPECT_EQ(nonfinite, 0u) << name;
      std::printf("[gpu] prefill attention persistent grid, %s: %zu of %zu differ from one CTA an item\n", name.c_str(),
                  differ, persistent.size());
    }
}

// Sliding-window attention (Mistral): decodes whose context is shorter, as long as and far longer
// than the window (the splits then cover only the window); prefills, fresh and after cached
// prefixes, whose rows start inside, at and past the window, on every prefill kernel that has the
// window (Auto routes windowed prefills of the Hopper kernels to mma.sync), windows smaller than,
// equal to and not a multiple of the 64-key tiles and the block size.
TEST(CudaAttention, SlidingWindow) {
  REQUIRE_GPU();
  Backends be;
  std::vector<SeqSpec> decodes;
  for (int32_t l : {1, 47, 48, 49, 97, 255, 256, 257, 1025, 4097, 33, 129}) decodes.push_back({l, 1});
  const std::vector<SeqSpec> prefills{{4097, 1000}, {1000, 333}, {130, 65}, {64, 63}, {77, 1}, {300, 44}, {48, 48}};
  const HeadCfg heads[] = {{32, 8, 128}, {4, 2, 64}, {6, 2, 32}, {9, 3, 16}};
  for (auto& h : heads)
    for (int64_t bs : {16, 256})
      for (int64_t window : {1, 48, 64, 100, 4096}) {
        const std::string tag = cfg_name("window", h, bs) + " W " + std::to_string(window);
        run_attention_case(be, tag + " decode", decodes, h.hq, h.hkv, h.d, bs, false, 51, window);
        for (auto kernel : {PrefillAttention::Auto, PrefillAttention::Mma, PrefillAttention::Tiled}) {
          if (kernel == PrefillAttention::Mma && h.d != 64 && h.d != 128) continue;  // (no such mma kernel)
          be.gpu.set_prefill_attention(kernel);
          run_attention_case(be, tag + " prefill kernel " + std::to_string(int(kernel)), prefills, h.hq, h.hkv, h.d, bs,
                             true, 52, window);
        }
        be.gpu.set_prefill_attention(PrefillAttention::Auto);
      }
}

TEST(CudaAttention, Decode) {
  REQUIRE_GPU();
  Backends be;
  std::vector<SeqSpec> b17;
  const int32_t lens[] = {1, 97, 255, 256, 257, 4097, 2, 31, 32, 33, 500, 1000, 1023, 1024, 1025, 3000, 17};
  for (int32_t l : lens) b17.push_back({l, 1});
  for (auto& h : kHeads)
    for (int64_t bs : {16, 256}) {
      run_attention_case(be, cfg_name("decode B17", h, bs), b17, h.hq, h.hkv, h.d, bs, false, 12);
      for (int32_t l : {1, 97, 256, 257, 4097})
        run_attention_case(be, cfg_name("decode B1", h, bs) + " ctx " + std::to_string(l), {{l, 1}}, h.hq, h.hkv, h.d,
                           bs, false, uint32_t(l));
    }
}

// Batches whose split count is not a power of two (5 and 3 splits on a 132-SM GPU).
TEST(CudaAttention, DecodeOddSplits) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t B : {7, 11}) {
    std::vector<SeqSpec> seqs;
    for (int64_t b = 0; b < B; ++b) seqs.push_back({int32_t(1 + b * 613 % 3001), 1});
    cuda::DecodeAttentionProblem p;
    p.num_seqs = B, p.num_heads = 16, p.num_kv_heads = 8, p.head_dim = 128;
    const auto plan = be.gpu.plan_decode_attention(p);
    run_attention_case(be, "decode B" + std::to_string(B) + " 16/8x128 splits " + std::to_string(plan.splits), seqs, 16,
                       8, 128, 16, false, uint32_t(B));
  }
}

// The cluster merge (sm_90+, kernel option decode_cluster=on; off by default, where partials go
// through global memory and the merge kernel): the splits merge through distributed shared memory.
TEST(CudaAttention, DecodeWithClusters) {
  REQUIRE_GPU();
  KernelOptions clusters;
  clusters.decode_cluster = true;
  Backends be(clusters);
  std::vector<SeqSpec> b17;
  for (int32_t l : {1, 97, 255, 256, 257, 4097, 2, 31, 32, 33, 500, 1000, 1023, 1024, 1025, 3000, 17})
    b17.push_back({l, 1});
  for (auto& h : kHeads) {
    run_attention_case(be, cfg_name("decode B17 cluster", h, 16), b17, h.hq, h.hkv, h.d, 16, false, 21);
    run_attention_case(be, cfg_name("decode B1 cluster", h, 16), {{1025, 1}}, h.hq, h.hkv, h.d, 16, false, 22);
  }
}

// The long-context plan (kernel_plan.h): small batches whose longest context reaches
// long_decode_context take up to long_decode_splits splits, merged by the merge kernel beyond 16.
// The threshold is lowered here so that the CPU reference stays quick.
TEST(CudaAttention, DecodeLongContextSplits) {
  REQUIRE_GPU();
  for (int splits : {32, 64, 128}) {
    KernelOptions o;
    o.long_decode_context = 256;
    o.long_decode_splits = splits;
    Backends be(o);
    for (auto& h : kHeads) {
      cuda::DecodeAttentionProblem p;
      p.num_seqs = 1, p.num_heads = h.hq, p.num_kv_heads = h.hkv, p.head_dim = h.d, p.max_context = 4097;
      const std::string plan = " splits " + std::to_string(be.gpu.plan_decode_attention(p).splits);
      run_attention_case(be, cfg_name("decode B1 long", h, 16) + plan, {{4097, 1}}, h.hq, h.hkv, h.d, 16, false, 41);
      // Contexts shorter than the splits: most CTAs have no keys (their partials weigh 0).
      run_attention_case(be, cfg_name("decode B3 long", h, 16) + plan, {{300, 1}, {2, 1}, {1000, 1}}, h.hq, h.hkv, h.d,
                         16, false, 42);
    }
  }
}

TEST(CudaAttention, BlockSizeOne) {
  REQUIRE_GPU();
  Backends be;
  run_attention_case(be, "prefill 4/2x32 bs1", {{30, 20}, {7, 7}}, 4, 2, 32, 1, true, 5);
  run_attention_case(be, "decode 4/2x64 bs1", {{30, 1}, {7, 1}}, 4, 2, 64, 1, false, 6);
}

// ---------------------------------------------------------------- sampler

// Logits l [B, V] on the GPU in dtype dt; l is rounded to what the GPU holds (BF16), so that the
// CPU sampler sees the same values.
Tensor gpu_logits(CudaBackend& gpu, std::vector<float>& l, int64_t B, int64_t V, DType dt) {
  if (dt == DType::BF16)
    for (auto& x : l) x = bf16_round(x);
  Tensor t = gpu.empty({B, V}, dt);
  gpu.upload(l.data(), DType::F32, t);
  return t;
}

TEST(CudaSampler, MatchesCpu) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t V : {1000, 151936}) {
    const int64_t B = 17;
    std::mt19937 g{uint32_t(V)};
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> logits(size_t(B * V));
    for (auto& x : logits) x = nd(g);
    std::vector<SamplingRow> rows;
    for (int64_t b = 0; b < B; ++b) {
      SamplingRow r;
      switch (b % 6) {
        case 0: r.temperature = 0; break;
        case 1: r.temperature = 0.7f; break;
        case 2:
          r.temperature = 1.0f;
          r.top_k = 50;
          break;
        case 3:
          r.temperature = 0.9f;
          r.top_p = 0.9f;
          break;
        case 4:
          r.temperature = 1.2f;
          r.min_p = 0.05f;
          break;
        case 5:
          r.temperature = 0.6f;
          r.top_k = 20;
          r.top_p = 0.8f;
          r.min_p = 0.01f;
          break;
      }
      r.seed = 1234 + uint64_t(b);
      r.position = 100 + b;
      rows.push_back(r);
    }
    for (DType dt : {DType::F32, DType::BF16}) {
      std::vector<float> l = logits;
      Tensor gl = gpu_logits(be.gpu, l, B, V, dt);
      auto got = be.gpu.sample(gl, rows);
      int mism = 0;
      for (int64_t b = 0; b < B; ++b) {
        const int32_t want = sample_row_cpu(l.data() + b * V, V, rows[size_t(b)]);
        EXPECT_EQ(got[size_t(b)], want) << "V " << V << " dtype " << dtype_name(dt) << " row " << b;
        mism += got[size_t(b)] != want;
      }
      std::printf("[gpu] sampler V=%lld %s: %d/%lld rows differ from the CPU\n", (long long)V, dtype_name(dt), mism,
                  (long long)B);
    }
  }
}

// Batches of rows without top-k/top-p/min-p split each row over several CTAs (the last reduces the
// slices): the CPU's tokens, through sample() and sample_async(), at vocabularies that are and are
// not multiples of the slice, with the maximum tied across slices (the lowest index wins), and
// again on the next launches (the per-row counters are left at zero).
TEST(CudaSampler, SplitRowsMatchTheCpu) {
  REQUIRE_GPU();
  Backends be;
  for (int64_t V : {151936, 50001, 9000}) {
    for (int64_t B : {1, 3, 8}) {
      std::mt19937 g{uint32_t(V + B)};
      std::normal_distribution<float> nd(0.f, 3.f);
      std::vector<float> logits(size_t(B * V));
      for (auto& x : logits) x = nd(g);
      // Row 0: its maximum twice, in the first and the last slice (greedy must take the first).
      logits[size_t(V - 3)] = 40.f;
      logits[5] = 40.f;
      std::vector<SamplingRow> rows(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) {
        rows[size_t(b)].temperature = b % 2 == 0 ? 0.f : 0.3f + 0.4f * float(b);
        rows[size_t(b)].seed = 77 + uint64_t(b);
        rows[size_t(b)].position = 1000 + b;
      }
      for (DType dt : {DType::F32, DType::BF16}) {
        std::vector<float> l = logits;
        Tensor gl = gpu_logits(be.gpu, l, B, V, dt);
        for (int rep = 0; rep < 3; ++rep) {
          const auto got = rep == 1 ? [&] {
            auto t = be.gpu.sample_async(gl, rows);
            return be.gpu.wait_tokens(t);
          }()
                                    : be.gpu.sample(gl, rows);
          ASSERT_EQ(got.size(), size_t(B));
          for (int64_t b = 0; b < B; ++b)
            EXPECT_EQ(got[size_t(b)], sample_row_cpu(l.data() + b * V, V, rows[size_t(b)]))
                << "V " << V << " B " << B << " " << dtype_name(dt) << " row " << b << " launch " << rep;
          EXPECT_EQ(got[0], 5) << "the tied maximum's lowest index";
        }
      }
    }
  }
}

TEST(CudaSampler, SeededDistribution) {
  REQUIRE_GPU();
  Backends be;
  // 4 tokens with probabilities 0.1 0.2 0.3 0.4: frequencies over many seeds.
  const int64_t V = 4, B = 512;
  std::vector<float> logits;
  for (int64_t b = 0; b < B; ++b)
    for (float p : {0.1f, 0.2f, 0.3f, 0.4f}) logits.push_back(std::log(p));
  std::vector<SamplingRow> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    rows[size_t(b)].temperature = 1.0f;
    rows[size_t(b)].seed = uint64_t(b) * 7919;
  }
  Tensor gl = be.gpu.empty({B, V}, DType::F32);
  be.gpu.upload(logits.data(), DType::F32, gl);
  auto got = be.gpu.sample(gl, rows);
  std::vector<int> count(4, 0);
  for (auto t : got) ++count[size_t(t)];
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(count[size_t(i)] / double(B), 0.1 * (i + 1), 0.07) << "token " << i;
  EXPECT_EQ(be.gpu.sample(gl, rows), got);  // same seeds, same tokens
}

// ---------------------------------------------------------------- memory

TEST(CudaMemory, ArenaRewindsAndPersistentSurvives) {
  REQUIRE_GPU();
  CudaBackend gpu(0);
  Tensor persistent = gpu.empty({1000}, DType::F32);
  std::vector<float> v(1000);
  std::iota(v.begin(), v.end(), 0.f);
  gpu.upload(v.data(), DType::F32, persistent);
  std::vector<void*> first;
  for (int step = 0; step < 3; ++step) {
    gpu.begin_step();
    std::vector<Tensor> live;
    std::vector<void*> ptrs;
    for (int64_t n : {10, 1000, 100000, 7}) {
      live.push_back(gpu.empty({n}, DType::BF16));
      ptrs.push_back(live.back().raw());
    }
    if (step == 0) first = ptrs;
    EXPECT_EQ(ptrs, first) << "step " << step;
    // A dropped tensor's block is reused within the step; live ones are not overlapped.
    void* freed = live[2].raw();
    live[2] = Tensor();
    EXPECT_EQ(gpu.empty({50000}, DType::BF16).raw(), freed);
    gpu.synchronize();
  }
  EXPECT_GT(gpu.peak_step_bytes(), 200000);
  // A step larger than the arena: grows, then the next step merges the chunks.
  gpu.begin_step();
  Tensor big = gpu.empty({int64_t(100) << 20}, DType::BF16);
  gpu.synchronize();
  gpu.begin_step();
  Tensor big2 = gpu.empty({int64_t(100) << 20}, DType::BF16);
  gpu.synchronize();
  EXPECT_EQ(gpu.to_host_f32(persistent), v);
  EXPECT_GT(gpu.total_memory_bytes(), 0);
  EXPECT_GT(gpu.free_memory_bytes(), 0);
}

// held_device_bytes: the backend's own tensors (outside steps) and its arena's chunks, whatever
// other processes do on the device: a tensor adds its bytes and gives them back when freed, a step
// that grows the arena adds the chunk.
TEST(CudaMemory, HeldDeviceBytesCountTheBackendsOwn) {
  REQUIRE_GPU();
  CudaBackend gpu(0);
  const int64_t before = gpu.held_device_bytes();
  EXPECT_GE(before, 0);
  Tensor t = gpu.empty({1000, 1000}, DType::BF16);
  EXPECT_EQ(gpu.held_device_bytes(), before + 2000000);
  {
    Tensor u = gpu.empty({3}, DType::F32);
    EXPECT_EQ(gpu.held_device_bytes(), before + 2000012);
  }
  EXPECT_EQ(gpu.held_device_bytes(), before + 2000000);
  gpu.begin_step();
  Tensor a = gpu.empty({int64_t(64) << 20}, DType::BF16);  // 128 MiB: past any first chunk
  gpu.synchronize();
  EXPECT_GE(gpu.held_device_bytes(), before + 2000000 + (int64_t(128) << 20));
}

TEST(CudaMemory, OutOfMemoryIsResourceError) {
  REQUIRE_GPU();
  CudaBackend gpu(0);
  EXPECT_THROW(gpu.empty({int64_t(1) << 40}, DType::F32), ResourceError);
  Tensor ok = gpu.empty({16}, DType::F32);  // still usable afterwards
  EXPECT_EQ(gpu.to_host_f32(ok).size(), 16u);
}

}  // namespace
