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

#include "two_prompt_forward.h"

using namespace nanovllm;
using test::Run;
using test::two_prompt_forward;

namespace {

void check(const std::string& fixture, CpuPrecision precision) {
  const ModelConfig cfg = load_model_config(test::fixture(fixture));
  const size_t H = size_t(cfg.hidden_size);
  const Run all = two_prompt_forward(fixture, precision, nullptr);
  ASSERT_EQ(all.rows, 34);
  for (const std::vector<int32_t>& rows : std::vector<std::vector<int32_t>>{{12, 33}, {0, 5, 12, 13, 30}, {}, {33}}) {
    const Run some = two_prompt_forward(fixture, precision, &rows);
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
  EXPECT_EQ(two_prompt_forward(fixture, precision, &every).hidden, all.hidden) << fixture;
}

}  // namespace

TEST(LastLayerRows, DenseModelEqualsTheFullForwardsRows) { check("tiny-qwen3-untied", CpuPrecision::Exact); }
TEST(LastLayerRows, DenseModelFastPrecision) { check("tiny-qwen3-tied", CpuPrecision::Fast); }
TEST(LastLayerRows, MoeModelEqualsTheFullForwardsRows) { check("tiny-qwen3-moe", CpuPrecision::Exact); }
