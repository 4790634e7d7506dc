// `nanovllm bench --interference`: what one long prompt does to the streams already running.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

struct InterferenceArgs {
  int64_t streams = 64;         // requests decoding when the long prompt arrives
  int64_t context = 1024;       // their prompt tokens
  int64_t prompt_len = 32000;   // the long prompt
};

// 1. The long prompt alone (after a warm-up one): its TTFT.
// 2. `streams` requests of `context` prompt tokens, decoding in steady state (their step time is
//    the baseline ITL); a prompt of one step's budget read alongside them (warm-up of the step
//    shapes); then a new long prompt arrives. Until its first token: the inter-token
//    latencies of the streams (each gap between two tokens of a stream that overlaps the window,
//    the one spanning the arrival included) and the long prompt's TTFT.
// Prompts are random token ids, distinct, so nothing comes from the prefix cache.
nlohmann::json interference(LLMEngine& e, const InterferenceArgs& a);

}  // namespace nanovllm::cli
