// The q/k norm + RoPE (+ KV-cache store) token kernel (qk_norm_rope_tokens.cu) at prefill sizes:
// bit for bit the head kernel's outputs (rope_kernel=head, qk_norm_rope.cu: qkv, and both caches
// poisoned first so that every write and every skipped slot shows) over Qwen3-0.6B's heads at
// T = 16,384 and 4,097 and odd head configurations (head_dim 16, 24, 64, 128, 256; 8- and 4-value
// lanes; one and two tokens per thread; several token rows per CTA; a token's heads over two
// CTAs), with and without the q/k norm, BF16 and FP8 caches, plain RoPE and YaRN, slots of -1;
// and close to the CPU backend (the oracle) at T = 4,097.
#include "gpu_test_util.h"
#include "nanovllm/layers/rotary_embedding.h"

#include <cstring>

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

struct RopeCase {
  int64_t hq, hkv, d, T;
  bool norm;
  bool fp8;    // the cache dtype (else BF16)
  bool yarn;   // YaRN (attention scaling > 1), else plain RoPE
  bool store;  // qk_norm_rope_store (else qk_norm_rope: no cache)
};

std::string name(const RopeCase& c) {
  return "hq " + std::to_string(c.hq) + " hkv " + std::to_string(c.hkv) + " D " + std::to_string(c.d) + " T " +
         std::to_string(c.T) + (c.norm ? " norm" : " no-norm") + (c.store ? (c.fp8 ? " fp8" : " bf16") : " no-store") +
         (c.yarn ? " yarn" : "");
}

RopeParams rope_of(const RopeCase& c) {
  if (!c.yarn) return RopeParams::plain(c.d, 1e6);
  RopeScaling y;
  y.type = "yarn";
  y.factor = 4;
  y.original_max_position_embeddings = 32768;
  return yarn_rope(c.d, 1e6, y);
}

std::vector<uint8_t> raw(CudaBackend& gpu, const Tensor& t) {
  std::vector<uint8_t> b(t.nbytes());
  gpu.download(t, b.data());
  return b;
}

size_t differing(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// The case's inputs (host) and metadata; run() gives one kernel's outputs on fresh copies.
struct RopeRun {
  RopeCase c;
  int64_t W, bs = 16, nblocks;
  std::vector<float> qkv, qw, kw;
  std::vector<int32_t> pos;
  AttentionMetadata md;
  KVScales scales{0.5f, 0.125f};

  explicit RopeRun(const RopeCase& rc) : c(rc), W((rc.hq + 2 * rc.hkv) * rc.d), nblocks((rc.T + 15) / 16 + 2) {
    qkv = rand_bf16(size_t(c.T * W), uint32_t(c.T + c.d), -2, 2);
    qw = rand_bf16(size_t(c.d), 9, 0.5, 1.5);
    kw = rand_bf16(size_t(c.d), 10, 0.5, 1.5);
    pos.resize(size_t(c.T));
    const int32_t span = c.yarn ? 131072 : 40000;
    for (int64_t t = 0; t < c.T; ++t) pos[size_t(t)] = int32_t((t * 977 + 5) % span);
    md.is_prefill = true;
    md.num_seqs = 1;
    md.num_tokens = c.T;
    md.max_blocks = nblocks;
    md.cu_seqlens_q = {0, int32_t(c.T)};
    md.cu_seqlens_k = {0, int32_t(c.T)};
    md.max_seqlen_q = md.max_seqlen_k = int32_t(c.T);
    md.context_lens = {int32_t(c.T)};
    std::vector<int32_t> blocks(static_cast<size_t>(nblocks));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937(uint32_t(c.T)));
    md.block_tables = blocks;
    for (int64_t t = 0; t < c.T; ++t)
      md.slot_mapping.push_back(t % 97 == 3 ? -1 : blocks[size_t(t / bs)] * int32_t(bs) + int32_t(t % bs));
  }

  struct Out {
    std::vector<uint8_t> qkv, k, v;
  };

  Out run(CudaBackend& gpu) {
    Tensor x = gpu.empty({c.T, W}, DType::BF16);
    gpu.upload(qkv.data(), DType::F32, x);
    Tensor w1 = gpu.empty({c.d}, DType::BF16), w2 = gpu.empty({c.d}, DType::BF16);
    gpu.upload(qw.data(), DType::F32, w1);
    gpu.upload(kw.data(), DType::F32, w2);
    Tensor p = gpu.empty({c.T}, DType::I32);
    gpu.upload(pos.data(), DType::I32, p);
    const RopeParams rope = rope_of(c);
    const Tensor nq = c.norm ? w1 : Tensor(), nk = c.norm ? w2 : Tensor();
    Out o;
    if (!c.store) {
      gpu.qk_norm_rope(x, nq, nk, p, c.hq, c.hkv, c.d, 1e-6f, rope);
      o.qkv = raw(gpu, x);
      return o;
    }
    const Shape cs{nblocks, bs, c.hkv, c.d};
    const DType dt = c.fp8 ? DType::F8E4M3 : DType::BF16;
    Tensor k = gpu.empty(cs, dt), v = gpu.empty(cs, dt);
    const size_t n = size_t(nblocks * bs * c.hkv * c.d);
    if (c.fp8) {  // poison: code 0x5a everywhere
      std::vector<uint8_t> poison(n, 0x5a);
      gpu.upload(poison.data(), dt, k);
      gpu.upload(poison.data(), dt, v);
    } else {
      std::vector<float> poison(n, 7.0f);
      gpu.upload(poison.data(), DType::F32, k);
      gpu.upload(poison.data(), DType::F32, v);
    }
    AttentionMetadata m = md;
    gpu.prepare_metadata(m);
    gpu.qk_norm_rope_store(x, nq, nk, p, k, v, c.hq, c.hkv, c.d, 1e-6f, rope, m, c.fp8 ? scales : KVScales{});
    o.qkv = raw(gpu, x);
    o.k = raw(gpu, k);
    o.v = raw(gpu, v);
    return o;
  }
};

// The token kernel's outputs against the head kernel's, bit for bit.
void expect_same_bits(CudaBackend& gpu, const RopeCase& c) {
  SCOPED_TRACE(name(c));
  const cuda::QkNormRopeProblem prob{c.T, c.hq, c.hkv, c.d, c.store, true};
  gpu.set_rope_kernel(RopeKernel::Token);
  ASSERT_EQ(gpu.plan_qk_norm_rope(prob).kernel, cuda::QkNormRopeKernel::Token);
  RopeRun r(c);
  const auto tok = r.run(gpu);
  gpu.set_rope_kernel(RopeKernel::Head);
  ASSERT_EQ(gpu.plan_qk_norm_rope(prob).kernel, cuda::QkNormRopeKernel::Head);
  const auto head = r.run(gpu);
  gpu.set_rope_kernel(RopeKernel::Auto);
  EXPECT_EQ(differing(tok.qkv, head.qkv), 0u) << "qkv bytes differ";
  EXPECT_EQ(differing(tok.k, head.k), 0u) << "k cache bytes differ";
  EXPECT_EQ(differing(tok.v, head.v), 0u) << "v cache bytes differ";
  std::vector<uint8_t> input(r.qkv.size() * 2);
  for (size_t i = 0; i < r.qkv.size(); ++i) {
    const uint16_t h = f32_to_bf16(r.qkv[i]);
    std::memcpy(&input[2 * i], &h, 2);
  }
  // q and k heads change (v stays): at least a quarter of the q/k values (BF16 pairs of bytes; a
  // value's high byte often survives the norm: a byte count fell under half at T = 1).
  size_t changed = 0;
  for (size_t i = 0; i + 1 < input.size(); i += 2) changed += tok.qkv[i] != input[i] || tok.qkv[i + 1] != input[i + 1];
  const size_t qk_values = size_t(c.T * (c.hq + c.hkv) * c.d);
  EXPECT_GT(changed, qk_values / 4) << "the kernels computed nothing";
}

}  // namespace

// Qwen3-0.6B's heads at the embeddings benchmark's 16K-token steps and at an odd T.
TEST(CudaQkNormRope, TokenKernelMatchesHeadKernelQwen3) {
  REQUIRE_GPU();
  CudaBackend gpu{0};
  for (const RopeCase& c :
       {RopeCase{16, 8, 128, 16384, true, false, false, true}, RopeCase{16, 8, 128, 16384, false, true, false, true},
        RopeCase{16, 8, 128, 4097, true, true, true, true}, RopeCase{16, 8, 128, 4097, false, false, false, true},
        RopeCase{16, 8, 128, 4097, true, false, false, false},
        RopeCase{32, 8, 128, 300, true, false, false, true},   // Qwen3-8B, one token per thread
        RopeCase{40, 8, 128, 2000, true, true, false, true}})  // Qwen3-14B
    expect_same_bits(gpu, c);
}

// Odd heads: 4-value lanes (D 24), one lane per head (D 16: 16 token rows per CTA), D 256 (a
// token's 48 slots over two CTAs), D 64; tiny T (every CTA of the first wave: tables before the wait).
TEST(CudaQkNormRope, TokenKernelMatchesHeadKernelOddHeads) {
  REQUIRE_GPU();
  CudaBackend gpu{0};
  for (const RopeCase& c :
       {RopeCase{6, 2, 24, 16384, true, true, false, true}, RopeCase{6, 2, 24, 4097, false, false, true, true},
        RopeCase{6, 2, 24, 4097, true, false, false, false}, RopeCase{9, 3, 16, 4097, true, false, false, true},
        RopeCase{9, 3, 16, 1000, false, true, false, true}, RopeCase{32, 8, 256, 1000, true, true, true, true},
        RopeCase{32, 8, 256, 1000, false, false, false, true}, RopeCase{14, 2, 64, 4097, false, true, false, true},
        RopeCase{4, 2, 64, 17, true, false, false, true}, RopeCase{4, 2, 32, 1, true, true, false, true},
        RopeCase{16, 8, 128, 1, true, false, false, true}})
    expect_same_bits(gpu, c);
}

// The token kernel (auto at this T) against the CPU oracle, as test_cuda_fused.cpp compares the
// head kernel: q/k within BF16 rounding, the v rows copied exactly, skipped slots untouched.
TEST(CudaQkNormRope, TokenKernelMatchesCpu) {
  REQUIRE_GPU();
  Backends be;
  const RopeCase c{16, 8, 128, 4097, true, false, false, true};
  ASSERT_EQ(be.gpu.plan_qk_norm_rope({c.T, c.hq, c.hkv, c.d, true, true}).kernel, cuda::QkNormRopeKernel::Token);
  RopeRun r(c);
  const auto g = r.run(be.gpu);
  auto x = make_pair(be.cpu, be.gpu, {c.T, r.W}, r.qkv);
  auto qw = make_pair(be.cpu, be.gpu, {c.d}, r.qw), kw = make_pair(be.cpu, be.gpu, {c.d}, r.kw);
  auto p = make_i32(be.cpu, be.gpu, r.pos);
  const Shape cs{r.nblocks, r.bs, c.hkv, c.d};
  const std::vector<float> poison(size_t(r.nblocks * r.bs * c.hkv * c.d), 7.0f);
  auto k = make_pair(be.cpu, be.gpu, cs, poison), v = make_pair(be.cpu, be.gpu, cs, poison);
  AttentionMetadata md = r.md;
  be.cpu.prepare_metadata(md);
  be.cpu.qk_norm_rope_store(x.cpu, qw.cpu, kw.cpu, p.cpu, k.cpu, v.cpu, c.hq, c.hkv, c.d, 1e-6f, rope_of(c), md);
  auto as_f32 = [](const std::vector<uint8_t>& b) {
    std::vector<float> f(b.size() / 2);
    for (size_t i = 0; i < f.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, &b[2 * i], 2);
      f[i] = bf16_to_f32(h);
    }
    return f;
  };
  expect_close("token kernel qkv", as_f32(g.qkv), be.cpu.to_host_f32(x.cpu), 1e-2, 5e-2);
  expect_close("token kernel k cache", as_f32(g.k), be.cpu.to_host_f32(k.cpu), 1e-2, 5e-2);
  EXPECT_EQ(as_f32(g.v), be.cpu.to_host_f32(v.cpu)) << "v rows are copied: bit-identical";
}
