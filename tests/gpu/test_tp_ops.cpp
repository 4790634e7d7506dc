// The CUDA ops of tensor parallelism against the CPU reference: the vocabulary-shard embedding
// (ids of other shards give zero rows) and the merge of all-gathered LM-head shards.
#include "gpu_test_util.h"

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

TEST(CudaTpOps, ShardEmbeddingZeroesOtherShardsIds) {
  REQUIRE_GPU();
  CpuBackend cpu{4};
  CudaBackend gpu{0};
  const int64_t V = 20, H = 64, T = 9, start = 20;  // this shard holds ids [20, 40)
  auto table = make_pair(cpu, gpu, {V, H}, rand_bf16(size_t(V * H), 3));
  auto id = make_i32(cpu, gpu, {0, 19, 20, 25, 39, 40, 55, 21, 3});
  Pair out{cpu.empty({T, H}, DType::F32), gpu.empty({T, H}, DType::BF16)};
  cpu.embedding(id.cpu, table.cpu, out.cpu, start);
  gpu.embedding(id.gpu, table.gpu, out.gpu, start);
  const auto got = gpu.to_host_f32(out.gpu);
  EXPECT_EQ(got, cpu.to_host_f32(out.cpu));
  for (int64_t i = 0; i < H; ++i) EXPECT_EQ(got[size_t(i)], 0.0f);  // id 0: another shard
  EXPECT_NE(got[size_t(2 * H)] + got[size_t(2 * H + 1)], 0.0f);     // id 20: row 0
}

TEST(CudaTpOps, MergeVocabShards) {
  REQUIRE_GPU();
  CpuBackend cpu{4};
  CudaBackend gpu{0};
  const int64_t N = 3, B = 5, Vl = 7;
  auto parts = make_pair(cpu, gpu, {N, B, Vl}, rand_bf16(size_t(N * B * Vl), 4));
  Pair out{cpu.empty({B, N * Vl}, DType::F32), gpu.empty({B, N * Vl}, DType::BF16)};
  cpu.merge_vocab_shards(parts.cpu, out.cpu);
  gpu.merge_vocab_shards(parts.gpu, out.gpu);
  const auto want = cpu.to_host_f32(out.cpu), in = cpu.to_host_f32(parts.cpu);
  EXPECT_EQ(gpu.to_host_f32(out.gpu), want);
  EXPECT_EQ(want[size_t(1 * N * Vl + 2 * Vl + 3)],
            in[size_t((2 * B + 1) * Vl + 3)]);  // out[1, 2*Vl+3] = parts[2, 1, 3]
}

}  // namespace
