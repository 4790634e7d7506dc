// bench.py's workload (bench_workload.h).
#include "bench_workload.h"

#include <algorithm>

#include "nanovllm/utils/python_random.h"

namespace nanovllm::cli {

int64_t bench_max_token_id(const LLMEngine& e) { return std::min<int64_t>(10000, e.model_config().vocab_size - 1); }

BenchWorkload bench_py_workload(const LLMEngine& e, int64_t num_seqs, int64_t max_input_len, int64_t max_output_len,
                                int64_t shared_prefix_len) {
  const int64_t max_id = bench_max_token_id(e);
  BenchWorkload w;
  PythonRandom rng(0);
  for (int64_t i = 0; i < num_seqs; ++i) {
    std::vector<int32_t> p(size_t(rng.randint(100, max_input_len)));
    for (auto& t : p) t = int32_t(rng.randint(0, max_id));
    w.prompts.push_back(std::move(p));
  }
  w.system.resize(size_t(shared_prefix_len));
  PythonRandom srng(4);
  for (auto& t : w.system) t = int32_t(srng.randint(0, max_id));
  for (auto& p : w.prompts) p.insert(p.begin(), w.system.begin(), w.system.end());
  for (int64_t i = 0; i < num_seqs; ++i) {
    SamplingParams sp;
    sp.temperature = 0.6f;
    sp.ignore_eos = true;
    sp.max_tokens = int(rng.randint(100, max_output_len));
    w.params.push_back(sp);
    w.prompt_tokens += int64_t(w.prompts[size_t(i)].size());
    w.output_tokens += sp.max_tokens;
  }
  return w;
}

void warm_up(LLMEngine& e, const BenchWorkload& w) {
  // Its 16 tokens in bench.py warm nothing more than a prefill and one decode step: they only
  // added ~1 s of batch-1 decode to the CPU demo's wall time.
  SamplingParams warm;
  warm.max_tokens = 2;
  std::vector<int32_t> prompt = w.system;
  prompt.insert(prompt.end(), {1, 2, 3, 4});
  e.add_request(prompt, warm);
  while (e.has_unfinished()) e.step();
}

}  // namespace nanovllm::cli
