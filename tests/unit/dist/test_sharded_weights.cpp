// Sharded weight loading: shard r of N along rows or columns holds exactly the full tensor's
// slice, for a real safetensors checkpoint (BF16 and F32 fixtures) and for dummy weights.
#include <gtest/gtest.h>

#include "nanovllm/models/weights.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"
#include "test_paths.h"

using namespace nanovllm;

namespace {

// Loads `name` (full shape `shape`) whole, and as every shard along `dim`; checks each shard
// equals the matching slice of the whole. Returns how many values were compared.
int64_t check_shards(Backend& be, const SafetensorsCheckpoint* ckpt, const std::string& name, const Shape& shape,
                     int dim, int n) {
  auto load = [&](WeightSpec s) {
    if (ckpt)
      load_weights(be, *ckpt, {s});
    else
      load_dummy_weights(be, {s});
  };
  Tensor full = be.empty(shape, DType::F32);
  load({name, shape, &full});
  const auto f = be.to_host_f32(full);
  const int64_t rows = shape[0], cols = shape[1];
  int64_t compared = 0;
  for (int r = 0; r < n; ++r) {
    WeightSpec s{name, shape, nullptr};
    s.shard_dim = dim;
    s.shard_rank = r;
    s.num_shards = n;
    Tensor part = be.empty(s.local_shape(), DType::F32);
    s.dst = &part;
    load(s);
    const auto p = be.to_host_f32(part);
    const int64_t lr = part.size(0), lc = part.size(1);
    for (int64_t i = 0; i < lr; ++i)
      for (int64_t j = 0; j < lc; ++j) {
        const int64_t fi = dim == 0 ? r * lr + i : i, fj = dim == 1 ? r * lc + j : j;
        EXPECT_EQ(p[size_t(i * lc + j)], f[size_t(fi * cols + fj)])
            << name << " shard " << r << "/" << n << " dim " << dim;
        ++compared;
      }
    EXPECT_EQ(dim == 0 ? lr * n : lc * n, dim == 0 ? rows : cols);
  }
  return compared;
}

}  // namespace

TEST(ShardedWeights, CheckpointSlicesEqualTheFullTensors) {
  auto be = make_cpu_backend(1);
  for (std::string model : {"tiny-qwen3-tied", "tiny-qwen3-untied"}) {
    SafetensorsCheckpoint ckpt(test::fixture(model));
    const TensorInfo& q = ckpt.get("model.layers.0.self_attn.q_proj.weight");
    const TensorInfo& o = ckpt.get("model.layers.1.self_attn.o_proj.weight");
    const TensorInfo& d = ckpt.get("model.layers.0.mlp.down_proj.weight");
    for (int n : {2, 4}) {
      EXPECT_EQ(check_shards(*be, &ckpt, q.name, q.shape, 0, n), q.numel()) << model;
      EXPECT_EQ(check_shards(*be, &ckpt, o.name, o.shape, 1, n), o.numel()) << model;
      EXPECT_EQ(check_shards(*be, &ckpt, d.name, d.shape, 1, n), d.numel()) << model;
    }
  }
}

TEST(ShardedWeights, DummySlicesEqualTheFullTensors) {
  auto be = make_cpu_backend(1);
  for (int n : {2, 3, 4})
    for (int dim : {0, 1})
      EXPECT_EQ(check_shards(*be, nullptr, "model.layers.3.mlp.down_proj.weight", {24, 36}, dim, n), 24 * 36);
}

TEST(ShardedWeights, IndivisibleSplitIsRefused) {
  WeightSpec s{"w", {10, 6}, nullptr};
  s.shard_dim = 0;
  s.num_shards = 4;
  EXPECT_THROW(s.local_shape(), LoadError);
}
