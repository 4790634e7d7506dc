// Speculative decoding's counters over one benchmark pass (bench --spec-acceptance, --latency):
// the engine's cumulative counters since a snapshot, and their JSON with the acceptance rates.
#pragma once
#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

double ratio(double a, double b);  // a / b, 0 when b is not positive (a speed-up, a rate)

// The counters of e since `before` (an earlier e.scheduler_stats().spec).
SpecDecodeStats spec_since(const LLMEngine& e, const SpecDecodeStats& before);

// spec_verify_rows, spec_draft_tokens, spec_accepted_tokens; spec_acceptance_rate (vLLM's:
// accepted / drafted), spec_per_token_acceptance (accepted / (accepted + rejections): the
// probability that a draft stands given those before it did), spec_mean_accepted_length (tokens a
// verify row emits: 1 + accepted drafts per verify row; 1 without any). Rates are 0 without drafts.
nlohmann::json spec_json(const SpecDecodeStats& st);

}  // namespace nanovllm::cli
