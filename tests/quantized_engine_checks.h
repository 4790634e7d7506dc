// Checks every --quantization scheme shares on the CPU engine: greedy generation against the
// unquantized engine on the tiny fixtures, and the refusal of fp8 and int8 for Qwen3-MoE (they have
// no path for its experts, so a partial quantization is refused rather than silently done).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

#include "engine_compare.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::test {

// The logits of every step up to the first differing token have cosine >= min_cosine (and < 1: the
// weights were quantized); token agreement is printed.
inline void expect_quantized_engine_near_unquantized(Quantization q, double min_cosine) {
  for (auto [fx, precision] : {std::pair{"tiny-qwen3-untied", CpuPrecision::Exact},
                               {"tiny-qwen3-tied", CpuPrecision::Exact},
                               {"tiny-llama3", CpuPrecision::Exact},
                               {"tiny-qwen2", CpuPrecision::Exact},
                               {"tiny-qwen3-untied", CpuPrecision::Fast}}) {
    EngineConfig cfg = tiny_cfg(fixture(fx));
    cfg.cpu_precision = precision;
    LLMEngine ref(cfg);
    cfg.quantization = q;
    LLMEngine quantized(cfg);
    const Agreement g = compare_greedy(ref, quantized);
    std::printf(
        "%s (%s): %s weights vs unquantized: %zu/%zu greedy tokens agree; worst logits cosine %.6f over %zu "
        "steps\n",
        fx, precision == CpuPrecision::Fast ? "fast" : "exact", quantization_name(q), g.same, g.total, g.worst_cosine,
        g.compared);
    EXPECT_EQ(g.total, 48u);
    EXPECT_GE(g.worst_cosine, min_cosine) << fx;
    EXPECT_LT(g.worst_cosine, 1.0) << fx << ": identical logits; were the weights quantized?";
  }
}

inline void expect_quantization_refused_for_moe(Quantization q) {
  EngineConfig cfg = tiny_cfg(fixture("tiny-qwen3-moe"));
  cfg.quantization = q;
  try {
    LLMEngine e(cfg);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    const std::string want =
        std::string("--quantization ") + quantization_name(q) + ": not implemented for " + "Qwen3MoeForCausalLM";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace nanovllm::test
