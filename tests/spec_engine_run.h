// Helpers of the speculative-decoding engine tests (draft model, EAGLE-3): prompts of seeded random
// tokens inside a range of ids, a workload's requests, and a run to the end that checks the block
// manager's invariants after every step and that every target KV block came back.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "nanovllm/engine/llm_engine.h"
#include "tiny_engine.h"

namespace nanovllm::test {

// n tokens in [3, 3 + range): never bos or eos.
inline std::vector<int32_t> spec_prompt(size_t n, uint32_t seed, int32_t range) {
  std::vector<int32_t> t = random_tokens(n, seed);
  for (auto& x : t) x = 3 + x % range;
  return t;
}

struct SpecRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

struct SpecRun {
  std::map<int64_t, std::vector<int32_t>> outputs;  // by request index
  SchedulerStats stats;
  int64_t steps = 0;
};

inline SpecRun run_requests(LLMEngine& e, const std::vector<SpecRequest>& reqs) {
  SpecRun out;
  std::map<int64_t, int64_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) index[e.add_request(reqs[i].prompt, reqs[i].params)] = int64_t(i);
  while (e.has_unfinished() && out.steps < 1000) {
    const StepResult r = e.step();
    ++out.steps;
    for (const RequestOutput& o : r.finished) out.outputs[index.at(o.request_id)] = o.token_ids;
    EXPECT_EQ(e.block_manager().check_invariants(e.live_sequences()), "") << "after step " << out.steps;
  }
  EXPECT_FALSE(e.has_unfinished());
  out.stats = e.scheduler_stats();
  EXPECT_EQ(out.stats.kv_blocks_used, 0) << "every target block back";
  return out;
}

}  // namespace nanovllm::test
