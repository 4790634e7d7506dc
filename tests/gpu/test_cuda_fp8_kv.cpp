// The FP8 (E4M3) KV cache on CUDA against the CPU backend's FP8 path (the oracle): store_kvcache
// and the fused q/k-norm + RoPE + store write the same codes; decode attention (split-KV, cluster
// and global-merge paths) and prefill attention (mma.sync, the kernel FP8 prefills take) read them
// with the layer's scales. Awkward shapes: batch 17, contexts 1/97/255/256/257/4097, shuffled
// block tables, prefix hits and chunks, GQA 1/2/4/8, head dims 64 and 128. Then the engine with
// --kv-cache-dtype fp8 against BF16 KV: the tiny fixtures, and Qwen3-0.6B size (NANOVLLM_HF06B_DIR,
// scripts/make_qwen3_06b_reference.py) where the last-token logits must keep cosine >= 0.995.
#include "gpu_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/fp8.h"
#include "test_paths.h"

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

// Random finite E4M3 codes (no NaN codes), magnitudes up to 448.
std::vector<uint8_t> rand_codes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v) {
    do c = uint8_t(g() & 0xff);
    while ((c & 0x7f) == 0x7f);
    c &= 0xbf;  // exponent < 8 (|value| < 2): scores of a normed model's size, not 448^2
  }
  return v;
}

// Batch over shuffled blocks; cached keys' codes written directly (the same bytes in both
// caches), new tokens' k/v stored by each backend, then the attention outputs compared.
void run_fp8_case(Backends& be, const std::string& name, const std::vector<SeqSpec>& seqs, int64_t hq, int64_t hkv,
                  int64_t D, int64_t bs, bool is_prefill, uint32_t seed, KVScales scales) {
  PagedBatch pb = paged_batch(seqs, bs, is_prefill, seed);
  AttentionMetadata& md = pb.md;
  const int64_t nblocks = pb.nblocks, T = md.num_tokens, row = hkv * D;
  std::vector<uint8_t> kc(size_t(nblocks * bs * row), 0), vc(kc.size(), 0);
  const auto kcodes = rand_codes(kc.size(), seed + 1), vcodes = rand_codes(kc.size(), seed + 2);
  for (int64_t slot : pb.cached_slots) {
    std::copy_n(kcodes.begin() + slot * row, row, kc.begin() + slot * row);
    std::copy_n(vcodes.begin() + slot * row, row, vc.begin() + slot * row);
  }
  const Shape cs{nblocks, bs, hkv, D};
  Pair k{be.cpu.empty(cs, DType::F8E4M3), be.gpu.empty(cs, DType::F8E4M3)};
  Pair v{be.cpu.empty(cs, DType::F8E4M3), be.gpu.empty(cs, DType::F8E4M3)};
  be.cpu.upload(kc.data(), DType::F8E4M3, k.cpu);
  be.gpu.upload(kc.data(), DType::F8E4M3, k.gpu);
  be.cpu.upload(vc.data(), DType::F8E4M3, v.cpu);
  be.gpu.upload(vc.data(), DType::F8E4M3, v.gpu);
  const int64_t W = (hq + 2 * hkv) * D;
  auto qkv = make_pair(be.cpu, be.gpu, {T, W}, rand_bf16(size_t(T * W), seed + 3, -2, 2));
  be.gpu.prepare_metadata(md);
  const float scale = float(1.0 / std::sqrt(double(D)));
  be.gpu.store_kvcache(qkv.gpu, k.gpu, v.gpu, hq, hkv, D, md, scales);
  Pair out{be.cpu.empty({T, hq * D}, DType::F32), be.gpu.empty({T, hq * D}, DType::BF16)};
  be.gpu.attention(qkv.gpu, k.gpu, v.gpu, out.gpu, hq, hkv, D, scale, md, 0, scales);
  // The CPU reference of these inputs (k codes, v codes, output), once per test (Backends::cpu_results).
  std::string key = "fp8/" + std::to_string(hq) + "/" + std::to_string(hkv) + "/" + std::to_string(D) + "/" +
                    std::to_string(bs) + "/" + std::to_string(is_prefill) + "/" + std::to_string(seed) + "/" +
                    std::to_string(scales.k) + "/" + std::to_string(scales.v);
  for (const SeqSpec& s : seqs) key += "/" + std::to_string(s.ctx) + ":" + std::to_string(s.qlen);
  const auto& ref = cpu_reference(be, key, [&] {
    be.cpu.store_kvcache(qkv.cpu, k.cpu, v.cpu, hq, hkv, D, md, scales);
    be.cpu.attention(qkv.cpu, k.cpu, v.cpu, out.cpu, hq, hkv, D, scale, md, 0, scales);
    return std::vector<std::vector<float>>{be.cpu.to_host_f32(k.cpu), be.cpu.to_host_f32(v.cpu),
                                           be.cpu.to_host_f32(out.cpu)};
  });
  // The same BF16 inputs times the same 1/scale: the same codes.
  EXPECT_EQ(be.gpu.to_host_f32(k.gpu), ref[0]) << name << ": k cache codes";
  EXPECT_EQ(be.gpu.to_host_f32(v.gpu), ref[1]) << name << ": v cache codes";
  // As the BF16 cases (test_cuda_ops.cpp): BF16 output rounding and accumulation order; prefill
  // also rounds code x scale to BF16 for the tensor cores (exact for power-of-two scales).
  // Values reach 2 x v_scale: the absolute bound of the BF16 cases (values up to 1) scales with them.
  expect_close(name, be.gpu.to_host_f32(out.gpu), ref[2], 1e-2, 3e-2 * std::max(1.0f, 2 * scales.v));
}

struct HeadCfg {
  int64_t hq, hkv, d;
};
// GQA groups 1, 2, 4, 8 at head dims 64 and 128.
const HeadCfg kHeads[] = {{4, 4, 128}, {16, 8, 128}, {16, 4, 128}, {8, 1, 128}, {4, 4, 64}, {8, 4, 64}, {32, 4, 64}};
const KVScales kScales[] = {{1.0f, 1.0f}, {0.5f, 0.25f}, {0.37f, 1.3f}};

std::string cfg_name(const char* what, const HeadCfg& h, int64_t bs, KVScales s) {
  return std::string(what) + " " + std::to_string(h.hq) + "/" + std::to_string(h.hkv) + "x" + std::to_string(h.d) +
         " bs" + std::to_string(bs) + " scales " + std::to_string(s.k) + "/" + std::to_string(s.v);
}

// Batch 17 of one-token rows over contexts 1..4097: the split-KV decode kernel with the cluster
// merge (sm_90), then without (the default: partials merged by the second kernel), and a batch of
// one long context (many splits).
TEST(CudaFp8KV, DecodeAwkwardShapes) {
  REQUIRE_GPU();
  const int32_t ctxs[] = {1, 97, 255, 256, 257, 4097, 2, 63, 64, 65, 300, 511, 512, 513, 1000, 17, 129};
  std::vector<SeqSpec> batch;
  for (int32_t c : ctxs) batch.push_back({c, 1});
  std::map<std::string, std::vector<std::vector<float>>> refs;  // the CPU references, shared by both
  for (bool cluster : {true, false}) {
    KernelOptions o;
    o.decode_cluster = cluster;
    Backends be(o);
    be.cpu_results = std::move(refs);
    for (auto& h : kHeads)
      for (int64_t bs : {16, 256})
        for (const KVScales& s : kScales) {
          const std::string tag = cluster ? "decode" : "decode-global-merge";
          run_fp8_case(be, cfg_name(tag.c_str(), h, bs, s), batch, h.hq, h.hkv, h.d, bs, false, 7, s);
          run_fp8_case(be, cfg_name((tag + "-b1").c_str(), h, bs, s), {{4097, 1}}, h.hq, h.hkv, h.d, bs, false, 9, s);
        }
    refs = std::move(be.cpu_results);
  }
}

// Prefills: fresh prompts around the 64-key tiles, and a batch with prefix hits and chunks ending
// mid-block, plus one-token rows leading a mixed step (decode kernel + a prefill kernel in one
// call), on a prefill kernel: mma.sync reads the codes, the TMA, wgmma and CUDA-core kernels a
// BF16 scratch copy of the blocks (kv_fp8_scratch.cu); auto is the TMA kernel on an H100.
void run_prefill_cases(Backends& be, PrefillAttention kernel, const char* tag, bool all_scales) {
  be.gpu.set_prefill_attention(kernel);
  for (auto& h : kHeads)
    for (int64_t bs : {16, 256})
      for (const KVScales& s : kScales) {
        if (!all_scales && s.k == 1.0f) continue;
        for (int32_t len : {1, 63, 64, 65, 97, 255, 256, 257})
          run_fp8_case(be, cfg_name(tag, h, bs, s) + " len " + std::to_string(len), {{len, len}}, h.hq, h.hkv, h.d, bs,
                       true, uint32_t(len + bs), s);
        const std::vector<SeqSpec> mixed{{257, 1}, {98, 1}, {4097, 1000}, {1000, 333}, {130, 65},
                                         {64, 63}, {77, 1}, {300, 44},    {65, 64}};
        run_fp8_case(be, cfg_name(tag, h, bs, s) + " mixed", mixed, h.hq, h.hkv, h.d, bs, true, 31, s);
      }
  be.gpu.set_prefill_attention(PrefillAttention::Auto);
}

TEST(CudaFp8KV, PrefillAwkwardShapes) {
  REQUIRE_GPU();
  Backends be;
  run_prefill_cases(be, PrefillAttention::Auto, "prefill[auto]", true);
  // Head dims only the CUDA-core kernel takes (the tiny fixtures' kind), through the scratch.
  for (const HeadCfg h : {HeadCfg{4, 2, 32}, HeadCfg{6, 2, 96}, HeadCfg{8, 8, 16}})
    for (int64_t bs : {16, 256}) {
      const KVScales s{0.37f, 1.3f};
      run_fp8_case(be, cfg_name("prefill-odd-head", h, bs, s), {{257, 1}, {1000, 333}, {65, 65}, {4097, 1000}}, h.hq,
                   h.hkv, h.d, bs, true, 41, s);
    }
}

// The other prefill kernels forced (fewer scales).
TEST(CudaFp8KV, PrefillAwkwardShapesForcedKernels) {
  REQUIRE_GPU();
  Backends be;  // one oracle for the three kernels: each case's CPU reference computed once
  run_prefill_cases(be, PrefillAttention::Wgmma, "prefill[wgmma]", false);
  run_prefill_cases(be, PrefillAttention::Mma, "prefill[mma]", false);
  run_prefill_cases(be, PrefillAttention::Tiled, "prefill[tiled]", false);
}

// mma.sync's rows per warp (16 or 32) on the FP8 codes.
TEST(CudaFp8KV, PrefillMmaRowsPerWarp) {
  REQUIRE_GPU();
  KernelOptions o;
  o.prefill_attention = PrefillAttention::Mma;
  Backends be(o);
  for (auto& h : kHeads)
    for (int64_t bs : {16, 256})
      for (const KVScales& s : kScales) {
        for (int rows : {16, 32}) {
          be.gpu.set_prefill_rows_per_warp(rows);
          run_fp8_case(be, cfg_name("prefill-mixed", h, bs, s) + " rows/warp " + std::to_string(rows),
                       {{4097, 1000}, {300, 44}, {1, 1}}, h.hq, h.hkv, h.d, bs, true, 33, s);
        }
        be.gpu.set_prefill_rows_per_warp(32);
      }
}

// The fused q/k-norm + RoPE + store: q/k as the BF16 path computes them, k and v codes within one
// E4M3 step of the CPU's (its k is FP32, ours BF16-rounded before quantization).
TEST(CudaFp8KV, FusedNormRopeStoreWritesCodes) {
  REQUIRE_GPU();
  Backends be;
  const int64_t hq = 16, hkv = 8, D = 128, T = 37, bs = 16, nblocks = 8, W = (hq + 2 * hkv) * D;
  auto qkv = make_pair(be.cpu, be.gpu, {T, W}, rand_bf16(size_t(T * W), 3, -2, 2));
  auto qw = make_pair(be.cpu, be.gpu, {D}, rand_bf16(size_t(D), 4, 0.5, 1.5));
  auto kw = make_pair(be.cpu, be.gpu, {D}, rand_bf16(size_t(D), 5, 0.5, 1.5));
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t * 131 % 4000);
  auto p = make_i32(be.cpu, be.gpu, pos);
  AttentionMetadata md;
  md.is_prefill = true;
  md.num_seqs = 1;
  md.num_tokens = T;
  md.max_blocks = nblocks;
  md.cu_seqlens_q = {0, int32_t(T)};
  md.cu_seqlens_k = {0, int32_t(T)};
  md.context_lens = {int32_t(T)};
  md.max_seqlen_q = md.max_seqlen_k = int32_t(T);
  for (int64_t b = 0; b < nblocks; ++b) md.block_tables.push_back(int32_t((b * 5) % nblocks));
  for (int64_t t = 0; t < T; ++t) md.slot_mapping.push_back(md.block_tables[size_t(t / bs)] * int32_t(bs) + t % bs);
  md.slot_mapping[3] = -1;  // skipped
  be.gpu.prepare_metadata(md);
  const Shape cs{nblocks, bs, hkv, D};
  Pair k{be.cpu.empty(cs, DType::F8E4M3), be.gpu.empty(cs, DType::F8E4M3)};
  Pair v{be.cpu.empty(cs, DType::F8E4M3), be.gpu.empty(cs, DType::F8E4M3)};
  std::vector<uint8_t> zeros(size_t(nblocks * bs * hkv * D), 0);
  for (Pair* c : {&k, &v}) {
    be.cpu.upload(zeros.data(), DType::F8E4M3, c->cpu);
    be.gpu.upload(zeros.data(), DType::F8E4M3, c->gpu);
  }
  const RopeParams rope = RopeParams::plain(D, 1e6);
  const KVScales s{0.5f, 0.125f};
  be.cpu.qk_norm_rope_store(qkv.cpu, qw.cpu, kw.cpu, p.cpu, k.cpu, v.cpu, hq, hkv, D, 1e-6f, rope, md, s);
  be.gpu.qk_norm_rope_store(qkv.gpu, qw.gpu, kw.gpu, p.gpu, k.gpu, v.gpu, hq, hkv, D, 1e-6f, rope, md, s);
  expect_close("fp8 qk_norm_rope_store qkv", be.gpu.to_host_f32(qkv.gpu), be.cpu.to_host_f32(qkv.cpu), 1e-2, 5e-2);
  // v: the same BF16 inputs, the same codes. k: values within one E4M3 step (1/8 relative), plus
  // what the two sides' roundings of the normed and rotated k leave where RoPE's x cos - y sin
  // nearly cancels: a BF16 step of the terms, which reach ~8 in code units (k_scale 0.5), is 0.03
  // (H100: 0.0156 and 0.0332 seen at small codes); and a small overall error.
  EXPECT_EQ(be.gpu.to_host_f32(v.gpu), be.cpu.to_host_f32(v.cpu)) << "v codes";
  const auto kg = be.gpu.to_host_f32(k.gpu), kc = be.cpu.to_host_f32(k.cpu);
  for (size_t i = 0; i < kg.size(); ++i) ASSERT_LE(std::fabs(kg[i] - kc[i]), std::fabs(kc[i]) / 7 + 8e-2) << i;
  expect_close("fp8 qk_norm_rope_store k codes", kg, kc, 3e-2, 8.0);
}

// --- the engine

struct EngineRun {
  std::map<int64_t, std::vector<float>> logits;  // request -> last-token logits of its prompt
  std::map<int64_t, std::vector<int32_t>> tokens;
};

EngineRun run_engine(const EngineConfig& cfg, const std::vector<std::vector<int32_t>>& prompts, int max_tokens) {
  LLMEngine e(cfg);
  const int64_t V = e.model_config().vocab_size;
  EngineRun r;
  e.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    for (size_t i = 0; i < b.seqs.size(); ++i)
      if (b.seqs[i]->num_completion_tokens() == 0 &&
          b.seqs[i]->num_cached_tokens + b.seqs[i]->num_scheduled_tokens == b.seqs[i]->num_tokens())
        r.logits[b.seqs[i]->id].assign(l.begin() + int64_t(i) * V, l.begin() + int64_t(i + 1) * V);
  };
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  std::vector<int64_t> ids;
  for (auto& p : prompts) ids.push_back(e.add_request(p, sp));
  while (e.has_unfinished())
    for (auto& o : e.step().finished) r.tokens[o.request_id] = o.token_ids;
  return r;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

// FP8 KV against BF16 KV, both CUDA, both with CUDA graphs: last-token logits of every prompt
// (cosine and top-1), and the greedy continuations (agreement printed).
void compare_fp8_engine(EngineConfig cfg, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
                        double min_cosine, const std::string& what) {
  const EngineRun a = run_engine(cfg, prompts, max_tokens);
  cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
  const EngineRun b = run_engine(cfg, prompts, max_tokens);
  ASSERT_EQ(a.logits.size(), prompts.size());
  ASSERT_EQ(b.logits.size(), prompts.size());
  double worst = 1, sum = 0;
  int top1 = 0;
  size_t same = 0, total = 0;
  for (auto& [id, la] : a.logits) {
    const auto& lb = b.logits.at(id);
    const double c = cosine(la, lb);
    worst = std::min(worst, c);
    sum += c;
    top1 += argmax(la) == argmax(lb);
    const auto &ta = a.tokens.at(id), &tb = b.tokens.at(id);
    for (size_t i = 0; i < std::min(ta.size(), tb.size()); ++i) same += ta[i] == tb[i];
    total += ta.size();
  }
  std::printf(
      "[gpu] %s: fp8 KV vs bf16 KV: last-token logits cosine min %.6f mean %.6f, top-1 %d/%zu, greedy "
      "tokens %zu/%zu agree\n",
      what.c_str(), worst, sum / double(prompts.size()), top1, prompts.size(), same, total);
  EXPECT_GE(worst, min_cosine) << what;
  EXPECT_LT(worst, 1.0) << what << ": identical logits; was the cache quantized?";
}

std::vector<std::vector<int32_t>> random_prompts(size_t n, int64_t V, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::vector<int32_t>> ps;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> p(1 + g() % 300);
    for (auto& t : p) t = int32_t(3 + g() % uint32_t(V - 3));
    ps.push_back(p);
  }
  return ps;
}

TEST(CudaFp8KV, TinyFixturesAreRefusedNamingTheHeadDim) {
  REQUIRE_GPU();
  // The tiny fixtures' head dims (16, 24, 32) have no FP8 decode kernel (decode and mma.sync take 64
  // and 128; the BF16 scratch of the other prefill kernels is not for decode steps, whose CUDA graphs
  // fix the grid); the engine refuses them at start-up with the shape, not mid-request. The FP8 engine
  // is compared with the BF16-KV engine at Qwen3-0.6B size below, and on every tiny fixture on the
  // CPU (test_fp8_kv_cache.cpp).
  for (const char* fx : {"tiny-qwen3-untied", "tiny-llama3", "tiny-mistral"}) {
    EngineConfig cfg;
    cfg.model = fixture(fx);
    cfg.device = DeviceChoice::Cuda;
    cfg.gpu_memory_utilization = 0.3;
    cfg.block_size = 16;
    cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
    try {
      LLMEngine e(cfg);
      SamplingParams sp;
      sp.max_tokens = 2;
      e.add_request({1, 2, 3}, sp);
      while (e.has_unfinished()) e.step();
      ADD_FAILURE() << fx << ": an FP8 KV cache at this head dim was not refused";
    } catch (const UserError& err) {
      EXPECT_NE(std::string(err.what()).find("no decode attention kernel reads an FP8 KV cache at head_dim"),
                std::string::npos)
          << fx << ": " << err.what();
    }
  }
}

// Qwen3-0.6B size, random weights (the reference directory of test_hf_qwen3_06b.cpp): the issue's
// bound, cosine >= 0.995 of the last-token logits against the BF16-KV engine; the FP8 engine's
// cosine to transformers' bf16 logits is printed beside the BF16 engine's.
TEST(CudaFp8KV, Qwen3_06BSizeLogitsNearBf16Kv) {
  REQUIRE_GPU();
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  ASSERT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  std::ifstream pin(std::string(dir) + "/prompts.json");
  ASSERT_TRUE(pin);
  auto prompts = nlohmann::json::parse(pin)["prompts"].get<std::vector<std::vector<int32_t>>>();
  EngineConfig cfg;
  cfg.model = dir;
  cfg.device = DeviceChoice::Cuda;
  cfg.gpu_memory_utilization = 0.5;
  compare_fp8_engine(cfg, prompts, 16, 0.995, "Qwen3-0.6B size");
}

}  // namespace
