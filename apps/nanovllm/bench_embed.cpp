// `nanovllm bench --embed` (bench_embed.h).
#include "bench_embed.h"

#include <algorithm>
#include <chrono>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/python_random.h"

namespace nanovllm::cli {

namespace {

// Runs every prompt to its end; returns the seconds it took.
double run_batch(LLMEngine& e, const std::vector<std::vector<int32_t>>& prompts) {
  SamplingParams sp;
  sp.pooling.emplace().task = e.pooling_model()->classify ? PoolingTask::Classify : PoolingTask::Embed;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& p : prompts) e.add_request(p, sp);
  int64_t done = 0;
  while (e.has_unfinished())
    for (auto& f : e.step().finished) done += f.pooled.empty() ? 0 : 1;
  if (done != int64_t(prompts.size()))
    throw Error("bench --embed: " + std::to_string(done) + " of " + std::to_string(prompts.size()) +
                " inputs came back pooled");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

nlohmann::json embed_throughput(LLMEngine& e, const EmbedBenchArgs& a) {
  if (!e.pooling_model()) throw UserError("bench --embed needs a pooling model (add --runner pooling)");
  if (a.inputs < 1 || a.input_len < 1) throw UserError("bench --embed: --embed-inputs and --embed-len must be >= 1");
  // The same ids as scripts/bench_embed_transformers.py: Python random.seed(0), randint(0, 10000).
  PythonRandom rng(0);
  const int64_t max_id = std::min<int64_t>(10000, e.model_config().vocab_size - 1);
  std::vector<std::vector<int32_t>> prompts(size_t(a.inputs), std::vector<int32_t>(size_t(a.input_len)));
  for (auto& p : prompts)
    for (auto& t : p) t = int32_t(rng.randint(0, max_id));
  const std::vector<std::vector<int32_t>> warm(prompts.begin(), prompts.begin() + std::min<int64_t>(a.inputs, 32));
  run_batch(e, warm);
  const double s = run_batch(e, prompts);
  return {{"mode", "embed_throughput"},
          {"inputs", a.inputs},
          {"input_len", a.input_len},
          {"seconds", s},
          {"inputs_per_s", double(a.inputs) / s},
          {"tokens_per_s", double(a.inputs * a.input_len) / s},
          {"pooling", pooling_type_name(e.pooling_model()->type)}};
}

}  // namespace nanovllm::cli
