// CUDA graph hooks of CudaBackend: a decode-shaped chain (attention through the paged cache with
// split-KV, o_proj GEMM, fused add+RMSNorm) captured once and replayed after its inputs changed
// gives the same bits as running it eagerly. The pattern the model runner follows: inside a step,
// prepare the inputs (metadata upload) first, then capture; the arena hands out the same
// addresses to the same sequence of allocations, so a warm-up step sizes it beforehand.
#include "gpu_test_util.h"

#include <algorithm>
#include <numeric>

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

TEST(CudaGraph, CaptureReplayMatchesEager) {
  REQUIRE_GPU();
  CudaBackend gpu(0);
  const int64_t B = 5, hq = 16, hkv = 8, D = 128, bs = 16, H = 1024, nblocks = 64;
  AttentionMetadata md;
  md.is_prefill = false;
  md.num_seqs = md.num_tokens = B;
  md.max_blocks = 8;
  md.cu_seqlens_q = {0};
  md.cu_seqlens_k = {0};
  std::vector<int32_t> pool(nblocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(3));
  for (int64_t b = 0; b < B; ++b) {
    const int32_t ctx = int32_t(1 + b * 29);
    for (int64_t i = 0; i < md.max_blocks; ++i) md.block_tables.push_back(pool[size_t(b * md.max_blocks + i)]);
    md.slot_mapping.push_back(md.block_tables[size_t(b * md.max_blocks + (ctx - 1) / bs)] * int32_t(bs) +
                              (ctx - 1) % int32_t(bs));
    md.context_lens.push_back(ctx);
    md.cu_seqlens_q.push_back(int32_t(b + 1));
    md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + ctx);
    md.max_seqlen_q = 1;
    md.max_seqlen_k = std::max(md.max_seqlen_k, ctx);
  }
  auto persistent = [&](const Shape& s, uint32_t seed) {
    Tensor t = gpu.empty(s, DType::BF16);
    int64_t n = 1;
    for (auto d : s) n *= d;
    auto v = rand_bf16(size_t(n), seed);
    gpu.upload(v.data(), DType::F32, t);
    return t;
  };
  Tensor kc = persistent({nblocks, bs, hkv, D}, 1), vc = persistent({nblocks, bs, hkv, D}, 2);
  Tensor qkv = persistent({B, (hq + 2 * hkv) * D}, 3), wo = persistent({H, hq * D}, 4), wn = persistent({H}, 5);
  Tensor res = persistent({B, H}, 6);
  const float scale = float(1.0 / std::sqrt(double(D)));
  auto chain = [&]() {
    gpu.store_kvcache(qkv, kc, vc, hq, hkv, D, md);
    Tensor o = gpu.empty({B, hq * D}, DType::BF16);
    gpu.attention(qkv, kc, vc, o, hq, hkv, D, scale, md);
    Tensor y = gpu.empty({B, H}, DType::BF16);
    gpu.linear(o, wo, y);
    Tensor r = gpu.empty({B, H}, DType::BF16);  // a copy of res, so that replays are idempotent
    gpu.gather_rows(res, {0, 1, 2, 3, 4}, r);
    gpu.add_rms_norm(y, r, wn, 1e-6f);
    return y;
  };
  // Warm-up (sizes the arena), then capture in a fresh step with the metadata uploaded first.
  gpu.begin_step();
  gpu.prepare_metadata(md);
  auto eager1 = gpu.to_host_f32(chain());
  gpu.synchronize();
  gpu.begin_step();
  gpu.prepare_metadata(md);
  gpu.graph_capture_begin();
  Tensor y = chain();
  const int64_t exec = gpu.graph_capture_end();
  EXPECT_TRUE(gpu.supports_graphs());
  gpu.graph_replay(exec);
  gpu.synchronize();
  EXPECT_EQ(gpu.to_host_f32(y), eager1);
  // New inputs in the same buffers: the replay follows them.
  auto v = rand_bf16(size_t(qkv.numel()), 99);
  gpu.upload(v.data(), DType::F32, qkv);
  gpu.graph_replay(exec);
  gpu.graph_replay(exec);
  gpu.synchronize();
  auto replayed = gpu.to_host_f32(y);
  gpu.begin_step();
  gpu.prepare_metadata(md);
  auto eager2 = gpu.to_host_f32(chain());
  gpu.synchronize();
  EXPECT_EQ(replayed, eager2);
  EXPECT_NE(eager1, eager2);
  gpu.graph_destroy(exec);
}

}  // namespace
