// The CUDA backend's fused op pairs against the CPU backend's unfused defaults:
//  * qk_norm_rope_store = qk_norm_rope + store_kvcache: same q/k, and the caches hold the same k/v
//    rows at every slot (shuffled slots, a -1 slot that must write nowhere, cache poisoned first),
//    with plain RoPE and with YaRN (Qwen3's recipe, positions up to 126,709).
//  * linear_silu_mul = linear + silu_and_mul: the fused skinny kernel (T <= 4) and the cuBLASLt
//    fallback (T = 17), N not a multiple of the kernel's 2 outputs per CTA.
//  * add_rms_norm_linear = add_rms_norm + linear (or linear_silu_mul): the GEMV with the norm as
//    its prologue, and its fallbacks.
// Tolerances as in test_cuda_ops.cpp (BF16 output rounding; the fused paths round like the HF model).
#include "gpu_test_util.h"
#include "nanovllm/layers/rotary_embedding.h"

#include <algorithm>
#include <numeric>

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

void check_qk_norm_rope_store(const RopeParams& rope, int32_t pos_step) {
  CpuBackend cpu{8};
  CudaBackend gpu{0};
  const int64_t hq = 16, hkv = 8, D = 128, T = 17, bs = 16, nblocks = 4;
  const int64_t W = (hq + 2 * hkv) * D, row = hkv * D, slots = nblocks * bs;
  auto qkv = make_pair(cpu, gpu, {T, W}, rand_bf16(size_t(T * W), 21, -2, 2));
  auto qw = make_pair(cpu, gpu, {D}, rand_bf16(size_t(D), 22, 0.5, 1.5));
  auto kw = make_pair(cpu, gpu, {D}, rand_bf16(size_t(D), 23, 0.5, 1.5));
  std::vector<int32_t> pos(T), slot(static_cast<size_t>(slots));
  for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(t * pos_step + 5);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(24));
  slot.resize(size_t(T));
  slot[5] = -1;  // a padded row: nothing written
  auto p = make_i32(cpu, gpu, pos);
  // Caches start from the same poison (7.0): untouched slots must stay 7 on both.
  std::vector<float> poison(size_t(slots * row), 7.0f);
  auto kc = make_pair(cpu, gpu, {nblocks, bs, hkv, D}, poison);
  auto vc = make_pair(cpu, gpu, {nblocks, bs, hkv, D}, poison);
  AttentionMetadata md = one_prefill_metadata(T, slot, nblocks);
  AttentionMetadata gmd = md;
  cpu.prepare_metadata(md);
  gpu.prepare_metadata(gmd);
  cpu.qk_norm_rope_store(qkv.cpu, qw.cpu, kw.cpu, p.cpu, kc.cpu, vc.cpu, hq, hkv, D, 1e-6f, rope, md);
  gpu.qk_norm_rope_store(qkv.gpu, qw.gpu, kw.gpu, p.gpu, kc.gpu, vc.gpu, hq, hkv, D, 1e-6f, rope, gmd);
  expect_close("qk_norm_rope_store qkv", gpu.to_host_f32(qkv.gpu), cpu.to_host_f32(qkv.cpu), 1e-2, 5e-2);
  expect_close("qk_norm_rope_store k_cache", gpu.to_host_f32(kc.gpu), cpu.to_host_f32(kc.cpu), 1e-2, 5e-2);
  const auto gv = gpu.to_host_f32(vc.gpu), cv = cpu.to_host_f32(vc.cpu);
  EXPECT_EQ(gv, cv) << "v rows are copied, not computed: they must be bit-identical";
  const auto gk = gpu.to_host_f32(kc.gpu);
  int64_t poisoned = 0;
  for (float x : gk) poisoned += x == 7.0f;
  EXPECT_EQ(poisoned, (slots - (T - 1)) * row) << "exactly the T-1 valid slots are written";
}

TEST(CudaFused, QkNormRopeStore) {
  REQUIRE_GPU();
  check_qk_norm_rope_store(RopeParams::plain(128, 1e6), 131);
}

TEST(CudaFused, QkNormRopeStoreYarn) {
  REQUIRE_GPU();
  RopeScaling y;
  y.type = "yarn";
  y.factor = 4;
  y.original_max_position_embeddings = 32768;
  const RopeParams rope = yarn_rope(128, 1e6, y);
  ASSERT_GT(rope.attention_scaling, 1.1f);
  check_qk_norm_rope_store(rope, 7919);
}

TEST(CudaFused, LinearSiluMul) {
  REQUIRE_GPU();
  CpuBackend cpu{8};
  CudaBackend gpu{0};
  for (auto [T, K, I] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1024, 3072}, {2, 1032, 77}, {3, 256, 100}, {4, 2048, 513}, {1, 100, 64}, {17, 1024, 160},
           {1, 1000, 77}, {1, 3072, 1025}, {1, 2200, 64}}) {
    auto x = make_pair(cpu, gpu, {T, K}, rand_bf16(size_t(T * K), 31));
    auto w = make_pair(cpu, gpu, {2 * I, K}, rand_bf16(size_t(2 * I * K), 32, -0.05f, 0.05f));
    Pair out{cpu.empty({T, I}, DType::F32), gpu.empty({T, I}, DType::BF16)};
    cpu.linear_silu_mul(x.cpu, w.cpu, out.cpu);
    gpu.linear_silu_mul(x.gpu, w.gpu, out.gpu);
    expect_close("linear_silu_mul T=" + std::to_string(T) + " K=" + std::to_string(K) + " I=" + std::to_string(I),
                 gpu.to_host_f32(out.gpu), cpu.to_host_f32(out.cpu), 1e-2, 5e-2);
  }
}

// add_rms_norm_linear = add_rms_norm + linear / linear_silu_mul: the GEMV with the norm as its
// prologue (T <= 4; the sum goes to a new residual buffer, written chunk by chunk by all CTAs),
// and the fallbacks (K % 8 != 0, x over 48 KiB, T = 17). Both the output and the updated residual
// are compared.
TEST(CudaFused, AddRmsNormLinear) {
  REQUIRE_GPU();
  CpuBackend cpu{8};
  CudaBackend gpu{0};
  for (auto [T, K, N, silu] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{{1, 1024, 4096, false},
                                                                                       {1, 1024, 3072, true},
                                                                                       {2, 1032, 77, false},
                                                                                       {3, 256, 100, true},
                                                                                       {4, 2048, 513, false},
                                                                                       {4, 4096, 1000, true},
                                                                                       {1, 4096, 6144, false},
                                                                                       {1, 100, 64, true},
                                                                                       {4, 8192, 50, false},
                                                                                       {17, 1024, 160, true},
                                                                                       {1, 1024, 1024, false}}) {
    const int64_t rows = silu ? 2 * N : N;
    auto x = make_pair(cpu, gpu, {T, K}, rand_bf16(size_t(T * K), 51 + uint32_t(K)));
    auto res = make_pair(cpu, gpu, {T, K}, rand_bf16(size_t(T * K), 52 + uint32_t(N), -4, 4));
    auto nw = make_pair(cpu, gpu, {K}, rand_bf16(size_t(K), 53, 0.5, 1.5));
    const float ws = 0.05f * std::sqrt(1024.0f / float(K));  // outputs of the same size at every K
    auto w = make_pair(cpu, gpu, {rows, K}, rand_bf16(size_t(rows * K), 54, -ws, ws));
    Pair out{cpu.empty({T, N}, DType::F32), gpu.empty({T, N}, DType::BF16)};
    cpu.add_rms_norm_linear(x.cpu, res.cpu, nw.cpu, 1e-6f, w.cpu, out.cpu, silu);
    gpu.add_rms_norm_linear(x.gpu, res.gpu, nw.gpu, 1e-6f, w.gpu, out.gpu, silu);
    const std::string tag =
        " T=" + std::to_string(T) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + (silu ? " silu" : "");
    expect_close("add_rms_norm_linear out" + tag, gpu.to_host_f32(out.gpu), cpu.to_host_f32(out.cpu), 1e-2, 5e-2);
    expect_close("add_rms_norm_linear residual" + tag, gpu.to_host_f32(res.gpu), cpu.to_host_f32(res.cpu), 1e-2, 5e-2);
  }
}

// Row-parallel partial sums: linear with an F32 output (no BF16 rounding: within FP32
// accumulation-order error of the CPU's F32 GEMM), then the cast to BF16 after the all-reduce.
TEST(CudaFused, LinearF32OutAndCast) {
  REQUIRE_GPU();
  CpuBackend cpu{8};
  CudaBackend gpu{0};
  for (auto [T, K, N] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1024, 1001}, {1, 3072, 77}, {3, 2048, 77}, {17, 1024, 300}}) {
    auto x = make_pair(cpu, gpu, {T, K}, rand_bf16(size_t(T * K), 41));
    auto w = make_pair(cpu, gpu, {N, K}, rand_bf16(size_t(N * K), 42, -0.05f, 0.05f));
    Tensor ref = cpu.empty({T, N}, DType::F32), got = gpu.empty({T, N}, DType::F32);
    cpu.linear(x.cpu, w.cpu, ref);
    gpu.linear(x.gpu, w.gpu, got);
    const std::string tag = " T=" + std::to_string(T) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
    const auto r = cpu.to_host_f32(ref);
    expect_close("linear F32 out" + tag, gpu.to_host_f32(got), r, 1e-5, 1e-4);
    Tensor bf = gpu.empty({T, N}, DType::BF16), back = gpu.empty({T, N}, DType::F32);
    gpu.cast(got, bf);
    gpu.cast(bf, back);
    const auto g = gpu.to_host_f32(got), b = gpu.to_host_f32(back), bh = gpu.to_host_f32(bf);
    size_t wrong = 0;
    for (size_t i = 0; i < g.size(); ++i) wrong += bh[i] != bf16_round(g[i]) || b[i] != bh[i];
    EXPECT_EQ(wrong, 0u) << "cast F32 -> BF16 rounds to nearest, BF16 -> F32 is exact" << tag;
  }
}

}  // namespace
