// The requests of nano-vllm's bench.py (Python random.seed(0): num_seqs prompts of
// randint(100, max_input_len) tokens drawn from randint(0, 10000), outputs of randint(100,
// max_output_len) tokens, temperature 0.6, ignore_eos), optionally after a shared system prompt of
// shared_prefix_len tokens (its own generator, so the rest stays bench.py's). Used by the
// throughput and the acceptance-controlled modes of `nanovllm bench`.
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/config/sampling_params.h"
#include "nanovllm/engine/llm_engine.h"

namespace nanovllm::cli {

struct BenchWorkload {
  std::vector<int32_t> system;  // the shared system prompt (empty without one)
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;  // bench.py's: temperature 0.6, ignore_eos, its max_tokens
  int64_t prompt_tokens = 0, output_tokens = 0;
};

// bench.py draws ids from [0, 10000]; smaller test vocabularies are clamped: the largest id drawn.
int64_t bench_max_token_id(const LLMEngine& e);

BenchWorkload bench_py_workload(const LLMEngine& e, int64_t num_seqs, int64_t max_input_len, int64_t max_output_len,
                                int64_t shared_prefix_len);

// bench.py's warm-up, of a prefill and one decode step (its prompt starts with the system prompt:
// as in a server's steady state, the system prompt has been seen before the requests come).
void warm_up(LLMEngine& e, const BenchWorkload& w);

}  // namespace nanovllm::cli
