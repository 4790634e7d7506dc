// CausalLM::forward with rows: the last layer's o_proj and MLP and the final norm run on the rows a
// step reads (its sampled or pooled rows) instead of every row. Its output must be the full
// forward's rows, and every row's K/V must still reach the cache (a later chunk attends to them).
// CPU backend, dummy weights on the tiny Qwen3 fixtures' configs (GQA) and on the tiny Qwen3-MoE one
// (the last layer's MLP is the sparse block), both precisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "nanovllm/backends/backend.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/weights.h"
#include "test_paths.h"

using namespace nanovllm;

namespace {

struct Run {
  std::vector<float> hidden;   // the forward's output
  std::vector<float> k_cache;  // every layer's K cache after it
  int64_t rows = 0;            // its rows
};

// Two prompts (13 and 21 tokens) prefilled in one step on a fresh cache.
Run forward(const std::string& fixture, CpuPrecision precision, const std::vector<int32_t>* rows) {
  const ModelConfig cfg = load_model_config(test::fixture(fixture));
  auto be = make_cpu_backend(2, precision);
  auto model = create_model(cfg, *be);
  auto specs = model->weight_specs();
  load_dummy_weights(*be, specs);
  model->finalize_weights();
  const int64_t bs = 16, blocks = 4, L = cfg.num_hidden_layers, Hkv = cfg.num_key_value_heads, D = cfg.head_dim;
  std::vector<Tensor> planes;
  std::vector<LayerKVCache> kv;
  const std::vector<float> zeros(size_t(blocks * bs * Hkv * D), 0.f);
  for (int64_t l = 0; l < L; ++l) {
    Tensor k = be->empty({blocks, bs, Hkv, D}, be->act_dtype()), v = be->empty({blocks, bs, Hkv, D}, be->act_dtype());
    be->upload(zeros.data(), DType::F32, k);
    be->upload(zeros.data(), DType::F32, v);
    kv.push_back({k, v, {}});
  }
  std::vector<int32_t> a(13), b(21);
  std::iota(a.begin(), a.end(), 7);
  std::iota(b.begin(), b.end(), 40);
  Sequence s1(1, a, SamplingParams{}, bs, 0), s2(2, b, SamplingParams{}, bs, 0);
  s1.block_table = {0};
  s2.block_table = {1, 2};
  s1.num_scheduled_tokens = 13, s2.num_scheduled_tokens = 21;
  ScheduledBatch batch;
  batch.seqs = {&s1, &s2};
  batch.is_prefill = true;
  StepInputs in = ModelRunner::prepare(batch, bs);
  const int64_t T = int64_t(in.input_ids.size());
  Tensor ids = be->empty({T}, DType::I32), pos = be->empty({T}, DType::I32);
  be->upload(in.input_ids.data(), DType::I32, ids);
  be->upload(in.positions.data(), DType::I32, pos);
  be->prepare_metadata(in.md);
  Tensor h = model->forward(ids, pos, kv, in.md, rows);
  Run r;
  r.hidden = be->to_host_f32(h);
  r.rows = h.size(0);
  for (auto& layer : kv) {
    const auto k = be->to_host_f32(layer.k);
    r.k_cache.insert(r.k_cache.end(), k.begin(), k.end());
  }
  return r;
}

void check(const std::string& fixture, CpuPrecision precision) {
  const ModelConfig cfg = load_model_config(test::fixture(fixture));
  const size_t H = size_t(cfg.hidden_size);
  const Run all = forward(fixture, precision, nullptr);
  ASSERT_EQ(all.rows, 34);
  for (const std::vector<int32_t>& rows : std::vector<std::vector<int32_t>>{{12, 33}, {0, 5, 12, 13, 30}, {}, {33}}) {
    const Run some = forward(fixture, precision, &rows);
    ASSERT_EQ(some.rows, int64_t(rows.size())) << fixture;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t k = 0; k < H; ++k) {
        const float want = all.hidden[size_t(rows[i]) * H + k];
        worst = std::max(worst, double(std::abs(some.hidden[i * H + k] - want)));
        scale = std::max(scale, double(std::abs(want)));
      }
    std::printf("%s, %zu rows: worst |diff| %.3e of max |h| %.3e\n", fixture.c_str(), rows.size(), worst, scale);
    // Fast precision: bit for bit. Exact: OpenBLAS's sgemm blocks by the row count, so the products
    // of a few rows sum in another order (seen: 3.3e-7 of the largest value); a wrong row is O(1) off.
    EXPECT_LE(worst, precision == CpuPrecision::Fast ? 0.0 : 2e-6 * scale) << fixture << ", " << rows.size() << " rows";
    EXPECT_EQ(some.k_cache, all.k_cache) << fixture << ": every row's K in every layer's cache";
  }
  std::vector<int32_t> every(34);
  std::iota(every.begin(), every.end(), 0);
  EXPECT_EQ(forward(fixture, precision, &every).hidden, all.hidden) << fixture;
}

}  // namespace

TEST(LastLayerRows, DenseModelEqualsTheFullForwardsRows) { check("tiny-qwen3-untied", CpuPrecision::Exact); }
TEST(LastLayerRows, DenseModelFastPrecision) { check("tiny-qwen3-tied", CpuPrecision::Fast); }
TEST(LastLayerRows, MoeModelEqualsTheFullForwardsRows) { check("tiny-qwen3-moe", CpuPrecision::Exact); }
