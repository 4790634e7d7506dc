// `nanovllm bench --spec-acceptance ALPHA`: speculative decoding's speed-up at a chosen acceptance
// rate (issue 46), labelled "acceptance-controlled" in its output. On bench.py's workload (or -n 1:
// one request, batch-1 decode), every request seeded:
//  1. a pass without speculation: the baseline, and the record of every request's output;
//  2. a pass with the acceptance-controlled drafter (spec/controlled_drafter.h): each request's
//     drafts are its recorded continuation with every token corrupted with probability 1 - ALPHA.
// Prints both passes' decode tok/s (tokens of steps without prompt tokens over their seconds) and
// output tok/s, the measured acceptance (vLLM's accepted / drafted, and per token: accepted /
// (accepted + rejections), which estimates ALPHA), the mean accepted length (tokens a verify row
// emits: 1 + accepted drafts), and whether the outputs of the two passes are identical (they must
// be: speculation is lossless; a GPU's multi-row GEMMs may flip a near-tie). Prefix caching is
// off in this mode (the second pass would find the first's prompts cached). With a
// --speculative-config (a draft model, say), its drafter runs every step for its cost, its
// proposals replaced (k: its num_speculative_tokens; its disable_by_batch_size applies).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "bench_workload.h"
#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

struct AcceptanceArgs {
  double alpha = -1;  // < 0: the mode is off
  int64_t num_speculative_tokens = 4;
  uint64_t seed = 0;  // of the corruption
};

nlohmann::json acceptance_controlled(LLMEngine& e, BenchWorkload w, const AcceptanceArgs& a);

}  // namespace nanovllm::cli
