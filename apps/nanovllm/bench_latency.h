// `nanovllm bench --latency`: batch-1 latency. One greedy request at a time, three times (the
// prompt's first id changed each time, so no prefix-cache hits between them): the median time to
// first token and the best decode tok/s (output tokens after the first over their seconds).
// --latency-repeat R makes the prompt a random segment of prompt_len / R tokens repeated R times
// (labelled "repeating prompt" in the output): a context that repeats itself, where n-gram drafting
// (prompt lookup) finds continuations as soon as the output repeats too. Random weights decide
// whether it does: the measured acceptance says what happened.
// With speculative decoding configured, both in one engine (prefix caching off, since the second
// pass reads the same prompts): the three requests without speculation (the drafter taken out,
// async scheduling back where it is the default), then with it; printed: each pass's TTFT and
// decode tok/s, the decode speed-up, speculation's counters and acceptance (bench_spec_stats.h)
// and whether the outputs are identical (greedy: they must be, up to a GPU's rounding of
// near-ties, since verify rows run other kernels than plain decoding).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

struct LatencyArgs {
  int64_t prompt_len = 1024, output_len = 256;
  int64_t repeat = 1;            // >= 2: the prompt is a random segment repeated this many times
  StructuredOutputs structured;  // every request's output constrained (--json-schema)
};

// The prompt: random ids (bench_max_token_id), or a random segment repeated to prompt_len tokens.
std::vector<int32_t> latency_prompt(const LLMEngine& e, const LatencyArgs& a);

nlohmann::json latency(LLMEngine& e, const LatencyArgs& a);

}  // namespace nanovllm::cli
