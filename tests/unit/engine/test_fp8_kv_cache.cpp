// The FP8 (E4M3) KV cache on the CPU backend, the oracle of the CUDA kernels: store quantizes with
// the layer's scales, attention reads code x scale; the engine with --kv-cache-dtype fp8 against
// the F32 cache on the tiny fixtures; the config, pool sizing and the checkpoint's scales.
// And the BF16 cache (--kv-cache-dtype bf16) on the CPU: rounded when stored, widened when read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "engine_compare.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/engine/kv_cache_scales.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/fp8.h"
#include "nanovllm/utils/safetensors.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

Tensor filled(CpuBackend& be, const Shape& shape, uint32_t seed, float lo, float hi) {
  Tensor t = be.empty(shape, DType::F32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Sequences (context, new tokens) over shuffled blocks of 16 slots: metadata for one step.
AttentionMetadata paged_md(const std::vector<std::pair<int32_t, int32_t>>& seqs, int64_t bs, int64_t& nblocks,
                           uint32_t seed) {
  AttentionMetadata md;
  int64_t max_blocks = 0;
  nblocks = 0;
  for (auto [ctx, q] : seqs) {
    nblocks += (ctx + bs - 1) / bs;
    max_blocks = std::max<int64_t>(max_blocks, (ctx + bs - 1) / bs);
  }
  std::vector<int32_t> pool(static_cast<size_t>(nblocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  md.num_seqs = int64_t(seqs.size());
  md.max_blocks = max_blocks;
  md.is_prefill = true;
  md.cu_seqlens_q = {0};
  md.cu_seqlens_k = {0};
  size_t next = 0;
  for (auto [ctx, q] : seqs) {
    const int64_t nb = (ctx + bs - 1) / bs;
    std::vector<int32_t> table(pool.begin() + int64_t(next), pool.begin() + int64_t(next + size_t(nb)));
    next += size_t(nb);
    for (int64_t i = 0; i < max_blocks; ++i) md.block_tables.push_back(i < nb ? table[size_t(i)] : -1);
    // The whole context is stored this step (q = ctx) or only its last q tokens (the rest: filled below).
    for (int32_t j = ctx - q; j < ctx; ++j)
      md.slot_mapping.push_back(table[size_t(j / bs)] * int32_t(bs) + j % int32_t(bs));
    md.cu_seqlens_q.push_back(md.cu_seqlens_q.back() + q);
    md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + ctx);
    md.context_lens.push_back(ctx);
    md.max_seqlen_q = std::max(md.max_seqlen_q, q);
    md.max_seqlen_k = std::max(md.max_seqlen_k, ctx);
  }
  md.num_tokens = md.cu_seqlens_q.back();
  return md;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, double(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
  return d;
}

// ||a - b|| / ||b||.
double rel_rms(const Tensor& a, const Tensor& b) {
  double e = 0, n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data<float>()[i]) - b.data<float>()[i];
    e += d * d;
    n += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(e / n);
}

// n prompt tokens inside a vocabulary of V (never the first few ids).
// Attention over an FP8 cache equals attention over an F32 cache holding the decoded values (code x
// scale), and stays within a stated bound of the unquantized F32 cache: E4M3 rounds each element by
// at most 2^-4 of its magnitude (about 2% on average), so the outputs move by a few percent of
// their norm (|q|, |k|, |v| <= 2 here: sharper softmax than a normed model's).
TEST(Fp8KVCache, CpuAttentionReadsDecodedCodesWithScales) {
  CpuBackend be(2);
  const int64_t Hq = 8, Hkv = 2, D = 32, W = (Hq + 2 * Hkv) * D, bs = 16;
  // Whole prompts (ctx == q), a chunk after cached keys, decodes of 1, 17, 33 keys.
  const std::vector<std::pair<int32_t, int32_t>> seqs = {{1, 1}, {17, 17}, {40, 9}, {33, 1}, {17, 1}, {48, 48}};
  int64_t nblocks = 0;
  AttentionMetadata md = paged_md(seqs, bs, nblocks, 3);
  const int64_t T = md.num_tokens;
  Tensor qkv = filled(be, {T, W}, 1, -2, 2);
  const KVScales scales{0.5f, 0.25f};
  Tensor k8 = be.empty({nblocks, bs, Hkv, D}, DType::F8E4M3), v8 = be.empty({nblocks, bs, Hkv, D}, DType::F8E4M3);
  Tensor k32 = be.empty({nblocks, bs, Hkv, D}, DType::F32), v32 = be.empty({nblocks, bs, Hkv, D}, DType::F32);
  // Keys of the cached prefix of the chunk ({40, 9}: 31 earlier keys): random, stored in both.
  {
    Tensor prior = filled(be, {nblocks, bs, Hkv, D}, 2, -2, 2);
    std::memcpy(k32.raw(), prior.raw(), prior.nbytes());
    std::memcpy(v32.raw(), prior.raw(), prior.nbytes());
    for (int64_t i = 0; i < prior.numel(); ++i) {
      k8.data<uint8_t>()[i] = f32_to_e4m3(prior.data<float>()[i] / scales.k);
      v8.data<uint8_t>()[i] = f32_to_e4m3(prior.data<float>()[i] / scales.v);
    }
  }
  be.store_kvcache(qkv, k8, v8, Hq, Hkv, D, md, scales);
  be.store_kvcache(qkv, k32, v32, Hq, Hkv, D, md);
  // The stored codes are the new tokens' k / v quantized with the scales.
  const int64_t row = Hkv * D;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < row; ++i) {
      const int64_t slot = md.slot_mapping[size_t(t)];
      ASSERT_EQ(k8.data<uint8_t>()[slot * row + i], f32_to_e4m3(qkv.data<float>()[t * W + Hq * D + i] * 2.0f));
      ASSERT_EQ(v8.data<uint8_t>()[slot * row + i], f32_to_e4m3(qkv.data<float>()[t * W + Hq * D + row + i] * 4.0f));
    }
  Tensor kd = be.empty(k8.shape(), DType::F32), vd = be.empty(v8.shape(), DType::F32);
  for (int64_t i = 0; i < k8.numel(); ++i) {
    kd.data<float>()[i] = e4m3_to_f32(k8.data<uint8_t>()[i]) * scales.k;
    vd.data<float>()[i] = e4m3_to_f32(v8.data<uint8_t>()[i]) * scales.v;
  }
  Tensor o8 = be.empty({T, Hq * D}, DType::F32), od = be.empty({T, Hq * D}, DType::F32),
         o32 = be.empty({T, Hq * D}, DType::F32);
  const float sm = 1.0f / std::sqrt(float(D));
  be.attention(qkv, k8, v8, o8, Hq, Hkv, D, sm, md, 0, scales);
  be.attention(qkv, kd, vd, od, Hq, Hkv, D, sm, md, 0);
  be.attention(qkv, k32, v32, o32, Hq, Hkv, D, sm, md, 0);
  EXPECT_LE(max_abs_diff(o8, od), 1e-5);
  const double err = rel_rms(o8, o32);
  std::printf("FP8 KV vs F32 KV attention: relative RMS error %.4f, max abs %.4f\n", err, max_abs_diff(o8, o32));
  EXPECT_LE(err, 0.04) << "FP8 KV vs F32 KV";
  EXPECT_LE(max_abs_diff(o8, o32), 0.25);
  EXPECT_GT(err, 1e-4) << "FP8 KV gave the F32 result: were the caches quantized?";
  // Sliding windows read the same codes.
  Tensor w8 = be.empty({T, Hq * D}, DType::F32), wd = be.empty({T, Hq * D}, DType::F32);
  be.attention(qkv, k8, v8, w8, Hq, Hkv, D, sm, md, 7, scales);
  be.attention(qkv, kd, vd, wd, Hq, Hkv, D, sm, md, 7);
  EXPECT_LE(max_abs_diff(w8, wd), 1e-5);
}

TEST(Fp8KVCache, ScalesWidenTheRangeAndSaturationIsBounded) {
  CpuBackend be(1);
  const int64_t Hq = 1, Hkv = 1, D = 8, W = 3 * D;
  int64_t nblocks = 0;
  AttentionMetadata md = paged_md({{4, 4}}, 4, nblocks, 1);
  Tensor qkv = filled(be, {4, W}, 5, -900, 900);
  for (float s : {1.0f, 4.0f}) {
    Tensor k = be.empty({nblocks, 4, Hkv, D}, DType::F8E4M3), v = be.empty({nblocks, 4, Hkv, D}, DType::F8E4M3);
    be.store_kvcache(qkv, k, v, Hq, Hkv, D, md, {s, s});
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t i = 0; i < D; ++i) {
        const float x = qkv.data<float>()[t * W + D + i];
        const float back = e4m3_to_f32(k.data<uint8_t>()[md.slot_mapping[size_t(t)] * D + i]) * s;
        if (std::fabs(x) <= 448 * s)
          EXPECT_NEAR(back, x, std::fabs(x) / 16 + 1e-6) << "scale " << s;
        else
          EXPECT_EQ(back, std::copysign(448 * s, x)) << "saturates, scale " << s;
      }
  }
}

TEST(Fp8KVCache, CpuRefusesMixedCachesAndBadScales) {
  CpuBackend be(1);
  int64_t nblocks = 0;
  AttentionMetadata md = paged_md({{3, 3}}, 4, nblocks, 1);
  Tensor qkv = filled(be, {3, 24}, 5, -1, 1), out = be.empty({3, 8}, DType::F32);
  Tensor k8 = be.empty({nblocks, 4, 1, 8}, DType::F8E4M3), v8 = be.empty({nblocks, 4, 1, 8}, DType::F8E4M3);
  Tensor v32 = be.empty({nblocks, 4, 1, 8}, DType::F32), k16 = be.empty({nblocks, 4, 1, 8}, DType::BF16);
  EXPECT_THROW(be.store_kvcache(qkv, k8, v32, 1, 1, 8, md), Error);
  EXPECT_THROW(be.attention(qkv, k8, v32, out, 1, 1, 8, 1.0f, md), Error);
  EXPECT_THROW(be.store_kvcache(qkv, k16, v32, 1, 1, 8, md), Error);
  EXPECT_THROW(be.attention(qkv, k8, k16, out, 1, 1, 8, 1.0f, md), Error);
  for (KVScales bad : {KVScales{0, 1}, KVScales{1, -1}, KVScales{NAN, 1}, KVScales{1, INFINITY}}) {
    EXPECT_THROW(be.store_kvcache(qkv, k8, v8, 1, 1, 8, md, bad), Error);
    EXPECT_THROW(be.attention(qkv, k8, v8, out, 1, 1, 8, 1.0f, md, 0, bad), Error);
  }
}

TEST(Fp8KVCache, ConfigNamesAndRefusals) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KVCacheDtype::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), KVCacheDtype::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), KVCacheDtype::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KVCacheDtype::FP8E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KVCacheDtype::FP8E4M3);
  for (const char* bad : {"fp8_e5m2", "int8", "FP8", ""}) {
    try {
      parse_kv_cache_dtype(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--kv-cache-dtype ") + bad + ":"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(resolve_kv_cache_dtype(KVCacheDtype::Auto, DType::F32, "cpu"), DType::F32);
  EXPECT_EQ(resolve_kv_cache_dtype(KVCacheDtype::FP8E4M3, DType::F32, "cpu"), DType::F8E4M3);
  EXPECT_EQ(resolve_kv_cache_dtype(KVCacheDtype::BF16, DType::BF16, "cuda"), DType::BF16);
  EXPECT_EQ(resolve_kv_cache_dtype(KVCacheDtype::BF16, DType::F32, "cpu"), DType::BF16);  // test_cpu_bf16_kv.cpp
}

// The same bytes hold four times the blocks of the CPU's F32 cache (twice those of a BF16 one).
TEST(Fp8KVCache, PoolCountsOneByteEntries) {
  EngineConfig cfg = test::tiny_cfg();
  LLMEngine f32(cfg);
  cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
  LLMEngine f8(cfg);
  EXPECT_EQ(f8.model_runner().kv_cache_dtype(), DType::F8E4M3);
  EXPECT_EQ(f8.model_runner().kv_bytes_per_block() * 4, f32.model_runner().kv_bytes_per_block());
  const int64_t a = f32.model_runner().num_kv_blocks(), b = f8.model_runner().num_kv_blocks();
  EXPECT_GE(b, 4 * a);
  EXPECT_LT(b, 4 * (a + 1));
}

// Greedy generation on the tiny fixtures with the FP8 cache against the F32 one: the logits of
// every step up to the first differing token (the same context in both) have cosine >= 0.99 (the
// issue's 0.995 is for Qwen3-0.6B size, tests/gpu; these random tiny models measured 0.9944 at
// worst); token agreement is reported.
TEST(Fp8KVCache, EngineAgreesWithTheF32CacheOnTinyFixtures) {
  struct Case {
    const char* fixture;
    CpuPrecision precision;  // the fast path (BF16 weights) reads the same FP8 cache
  };
  for (const Case c : {Case{"tiny-qwen3-untied", CpuPrecision::Exact}, Case{"tiny-llama3", CpuPrecision::Exact},
                       Case{"tiny-qwen2", CpuPrecision::Exact}, Case{"tiny-mistral", CpuPrecision::Exact},
                       Case{"tiny-qwen3-untied", CpuPrecision::Fast}}) {
    const char* fx = c.fixture;
    EngineConfig cfg = test::tiny_cfg(test::fixture(fx));
    cfg.cpu_precision = c.precision;
    LLMEngine ref(cfg);
    cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
    LLMEngine f8(cfg);
    const test::Agreement g = test::compare_greedy(ref, f8);
    const size_t same = g.same, total = g.total, compared = g.compared;
    const double worst = g.worst_cosine;
    EXPECT_EQ(total, 48u);
    std::printf("%s (%s): fp8 KV vs F32 KV: %zu/%zu greedy tokens agree; worst logits cosine %.6f over %zu steps\n", fx,
                c.precision == CpuPrecision::Fast ? "fast" : "exact", same, total, worst, compared);
    EXPECT_GE(worst, 0.99) << fx;
    EXPECT_LT(worst, 1.0) << fx << ": identical logits; was the cache quantized?";
  }
}

// A safetensors file of one-element F32 tensors (shape [] or [1]).
std::string scalar_safetensors(const std::vector<std::pair<std::string, float>>& ts) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (size_t i = 0; i < ts.size(); ++i) {
    h[ts[i].first] = {{"dtype", "F32"},
                      {"shape", i % 2 ? nlohmann::json::array({1}) : nlohmann::json::array()},
                      {"data_offsets", {data.size(), data.size() + 4}}};
    data.append(reinterpret_cast<const char*>(&ts[i].second), 4);
  }
  std::string hs = h.dump();
  uint64_t n = hs.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + hs + data;
}

TEST(Fp8KVCache, ScalesFromTheCheckpointUnderVllmsNames) {
  test::TempDir d;
  d.write("scales.safetensors", scalar_safetensors({{"model.layers.0.self_attn.k_scale", 0.5f},
                                                    {"model.layers.0.self_attn.v_scale", 0.25f},
                                                    {"model.layers.1.self_attn.kv_scale", 2.0f},
                                                    {"model.layers.1.self_attn.attn.v_scale", 3.0f},
                                                    {"model.layers.2.self_attn.k_proj.k_scale", 1.5f},
                                                    {"model.layers.2.self_attn.v_proj.v_scale", 0.75f}}));
  SafetensorsCheckpoint ckpt(d.dir.string());
  const auto s = load_kv_cache_scales(ckpt, 4);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].k, 0.5f);
  EXPECT_EQ(s[0].v, 0.25f);
  EXPECT_EQ(s[1].k, 2.0f);  // kv_scale for both, then the specific v_scale wins
  EXPECT_EQ(s[1].v, 3.0f);
  EXPECT_EQ(s[2].k, 1.5f);  // ModelOpt's names
  EXPECT_EQ(s[2].v, 0.75f);
  EXPECT_EQ(s[3].k, 1.0f);  // none: 1.0
  EXPECT_EQ(s[3].v, 1.0f);
  test::TempDir bad("nanovllm_test_bad_");
  bad.write("scales.safetensors", scalar_safetensors({{"model.layers.0.self_attn.k_scale", -1.0f}}));
  SafetensorsCheckpoint bad_ckpt(bad.dir.string());
  try {
    load_kv_cache_scales(bad_ckpt, 1);
    ADD_FAILURE() << "negative scale accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.k_scale"), std::string::npos) << e.what();
  }
}

// The engine applies the checkpoint's scales: the fixture plus scales of 1e-3 (keys and values
// saturate at +-0.448) changes the logits; scales of 1.0 written out change nothing.
TEST(Fp8KVCache, EngineUsesTheCheckpointScales) {
  const std::string src = test::fixture("tiny-qwen3-tied");  // one model.safetensors
  auto run = [&](float scale) {
    test::TempDir d("nanovllm_test_scale_" + std::to_string(int(scale * 1000)) + "_");
    for (auto f : {"config.json", "generation_config.json"}) std::filesystem::copy_file(src + "/" + f, d.dir / f);
    std::filesystem::copy_file(src + "/model.safetensors", d.dir / "model-00001.safetensors");
    const int64_t L = load_model_config(src).num_hidden_layers;
    std::vector<std::pair<std::string, float>> ts;
    for (int64_t l = 0; l < L; ++l) {
      ts.push_back({"model.layers." + std::to_string(l) + ".self_attn.k_scale", scale});
      ts.push_back({"model.layers." + std::to_string(l) + ".self_attn.v_scale", scale});
    }
    d.write("model-00002.safetensors", scalar_safetensors(ts));
    EngineConfig cfg = test::tiny_cfg(d.dir.string());
    cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
    LLMEngine e(cfg);
    return test::generate(e, test::prompt_tokens(20, 512, 9), 2).logits.at(0);
  };
  EngineConfig cfg = test::tiny_cfg(src);
  cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
  LLMEngine plain(cfg);
  const auto base = test::generate(plain, test::prompt_tokens(20, 512, 9), 2).logits.at(0);
  EXPECT_EQ(run(1.0f), base);
  EXPECT_NE(run(0.001f), base);
}

}  // namespace
}  // namespace nanovllm

namespace nanovllm {
namespace {

// --kv-cache-dtype bf16 on the CPU: store rounds keys and values to BF16 (nearest even), and
// attention over the BF16 cache equals, bit for bit, attention over an F32 cache holding the same
// rounded values (prefill chunks with a cached prefix, GQA, a one-token sequence).
TEST(Bf16KVCache, CpuAttentionEqualsF32OverTheRoundedValues) {
  CpuBackend be(2);
  const int64_t Hq = 4, Hkv = 2, D = 64, bs = 4, W = (Hq + 2 * Hkv) * D;
  int64_t nblocks = 0;
  AttentionMetadata md = paged_md({{40, 9}, {7, 7}, {1, 1}}, bs, nblocks, 5);
  const int64_t T = md.num_tokens;
  Tensor qkv = filled(be, {T, W}, 1, -2, 2);
  Tensor k16 = be.empty({nblocks, bs, Hkv, D}, DType::BF16), v16 = be.empty({nblocks, bs, Hkv, D}, DType::BF16);
  Tensor k32 = filled(be, {nblocks, bs, Hkv, D}, 2, -2, 2), v32 = filled(be, {nblocks, bs, Hkv, D}, 3, -2, 2);
  for (int64_t i = 0; i < k32.numel(); ++i) {  // the cached prefix: the same values in both
    k16.data<uint16_t>()[i] = f32_to_bf16(k32.data<float>()[i]);
    v16.data<uint16_t>()[i] = f32_to_bf16(v32.data<float>()[i]);
  }
  be.store_kvcache(qkv, k16, v16, Hq, Hkv, D, md);
  be.store_kvcache(qkv, k32, v32, Hq, Hkv, D, md);
  for (int64_t i = 0; i < k32.numel(); ++i) {
    ASSERT_EQ(k16.data<uint16_t>()[i], f32_to_bf16(k32.data<float>()[i])) << i;
    ASSERT_EQ(v16.data<uint16_t>()[i], f32_to_bf16(v32.data<float>()[i])) << i;
    k32.data<float>()[i] = bf16_to_f32(k16.data<uint16_t>()[i]);
    v32.data<float>()[i] = bf16_to_f32(v16.data<uint16_t>()[i]);
  }
  Tensor o16 = be.empty({T, Hq * D}, DType::F32), o32 = be.empty({T, Hq * D}, DType::F32);
  be.attention(qkv, k16, v16, o16, Hq, Hkv, D, 0.125f, md);
  be.attention(qkv, k32, v32, o32, Hq, Hkv, D, 0.125f, md);
  EXPECT_EQ(std::memcmp(o16.raw(), o32.raw(), o16.nbytes()), 0);
}

// The engine with a BF16 cache against the F32 one on the tiny fixtures: logits cosine >= 0.999
// up to the first differing token (agreement printed), and twice the blocks in the same bytes.
TEST(Bf16KVCache, EngineAgreesWithTheF32CacheOnTinyFixtures) {
  for (auto [fx, precision] : {std::pair{"tiny-qwen3-untied", CpuPrecision::Exact},
                               {"tiny-llama3", CpuPrecision::Exact},
                               {"tiny-mistral", CpuPrecision::Exact},
                               {"tiny-qwen3-untied", CpuPrecision::Fast}}) {
    EngineConfig cfg = test::tiny_cfg(test::fixture(fx));
    cfg.cpu_precision = precision;
    LLMEngine ref(cfg);
    cfg.kv_cache_dtype = KVCacheDtype::BF16;
    LLMEngine b16(cfg);
    EXPECT_EQ(b16.model_runner().kv_cache_dtype(), DType::BF16);
    EXPECT_EQ(b16.model_runner().kv_bytes_per_block() * 2, ref.model_runner().kv_bytes_per_block());
    EXPECT_GE(b16.model_runner().num_kv_blocks(), 2 * ref.model_runner().num_kv_blocks());
    const test::Agreement g = test::compare_greedy(ref, b16);
    std::printf("%s (%s): bf16 KV vs F32 KV: %zu/%zu greedy tokens agree; worst logits cosine %.6f over %zu steps\n",
                fx, precision == CpuPrecision::Fast ? "fast" : "exact", g.same, g.total, g.worst_cosine, g.compared);
    EXPECT_EQ(g.total, 48u);
    EXPECT_GE(g.worst_cosine, 0.999) << fx;
    EXPECT_LT(g.worst_cosine, 1.0) << fx << ": identical logits; was the cache rounded?";
  }
}

}  // namespace
}  // namespace nanovllm
