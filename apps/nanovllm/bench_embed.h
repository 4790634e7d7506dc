// `nanovllm bench --embed`: embeddings throughput of a pooling model (the workload: 1,000
// inputs of 512 random tokens by default, all queued at once as a client batch would send them):
// inputs/s and tokens/s, after a warm-up batch. The peer is scripts/bench_embed_transformers.py
// (transformers' batched forward + the same pooling) on the same inputs.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

struct EmbedBenchArgs {
  int64_t inputs = 1000;
  int64_t input_len = 512;
};

nlohmann::json embed_throughput(LLMEngine& e, const EmbedBenchArgs& a);

}  // namespace nanovllm::cli
