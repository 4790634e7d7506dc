// The batch-1 latency mode (bench_latency.h).
#include "bench_latency.h"

#include <algorithm>
#include <cstdio>

#include "bench_spec_stats.h"
#include "bench_workload.h"
#include "latency_stats.h"
#include "nanovllm/spec/drafter.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/progress.h"
#include "nanovllm/utils/python_random.h"

namespace nanovllm::cli {
namespace {

constexpr int kRepetitions = 3;

struct Pass {
  double ttft_median = 0, decode_tok_s = 0;
  std::vector<std::vector<int32_t>> outputs;  // by repetition
  SpecDecodeStats spec;                       // this pass's counters
  nlohmann::json json() const { return {{"ttft_ms_median", ttft_median * 1e3}, {"decode_tok_s", decode_tok_s}}; }
};

Pass run_pass(LLMEngine& e, const LatencyArgs& a, std::vector<int32_t> prompt) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.max_tokens = 2;  // warm-up
  e.add_request({5, 6, 7}, sp);
  while (e.has_unfinished()) e.step();
  sp.max_tokens = int(a.output_len);
  sp.structured_outputs = a.structured;
  Pass p;
  const SpecDecodeStats s0 = e.scheduler_stats().spec;
  std::vector<double> ttfts;
  ProgressBar bar(kRepetitions, true);
  for (int rep = 0; rep < kRepetitions; ++rep) {
    prompt[0] = int32_t(rep);  // no prefix-cache hits between repetitions
    const double t0 = now_seconds();
    e.add_request(prompt, sp);
    double first = 0;
    int64_t tokens = 0;
    while (e.has_unfinished()) {
      auto r = e.step();
      tokens += int64_t(r.new_tokens.size());
      if (tokens >= 1 && first == 0) first = now_seconds();
      bar.on_step(r.is_prefill, r.num_tokens, r.seconds);
      for (const RequestOutput& o : r.finished) p.outputs.push_back(o.token_ids);
    }
    bar.on_finished();
    const double t1 = now_seconds();
    ttfts.push_back(first - t0);
    p.decode_tok_s = std::max(p.decode_tok_s, double(tokens - 1) / (t1 - first));
  }
  bar.done();
  std::sort(ttfts.begin(), ttfts.end());
  p.ttft_median = ttfts[kRepetitions / 2];
  p.spec = spec_since(e, s0);
  return p;
}

}  // namespace

std::vector<int32_t> latency_prompt(const LLMEngine& e, const LatencyArgs& a) {
  if (a.repeat < 1 || a.repeat > a.prompt_len)
    throw UserError("bench: --latency-repeat must be in [1, --latency-prompt-len]");
  PythonRandom rng(1);
  const int64_t segment = (a.prompt_len + a.repeat - 1) / a.repeat;
  std::vector<int32_t> prompt(size_t(a.prompt_len));
  for (int64_t i = 0; i < a.prompt_len; ++i)
    prompt[size_t(i)] = i < segment ? int32_t(rng.randint(0, bench_max_token_id(e))) : prompt[size_t(i - segment)];
  return prompt;
}

nlohmann::json latency(LLMEngine& e, const LatencyArgs& a) {
  const std::vector<int32_t> prompt = latency_prompt(e, a);
  nlohmann::json out = {{"mode", "latency"}, {"prompt_tokens", a.prompt_len}, {"output_tokens", a.output_len}};
  if (a.repeat > 1) {
    const int64_t segment = (a.prompt_len + a.repeat - 1) / a.repeat;
    out["prompt"] = "repeating prompt: a random " + std::to_string(segment) + "-token segment repeated to " +
                    std::to_string(a.prompt_len) + " tokens (" + std::to_string(a.repeat) + " times)";
    out["prompt_repeat"] = a.repeat;
  }
  if (!e.speculating()) {
    const Pass p = run_pass(e, a, prompt);
    out.update(p.json());
    return out;
  }
  std::unique_ptr<Drafter> drafter = e.take_drafter();
  const Pass off = run_pass(e, a, prompt);
  e.set_drafter(std::move(drafter));
  const Pass on = run_pass(e, a, prompt);
  int64_t mismatched = 0;
  for (size_t i = 0; i < off.outputs.size(); ++i)
    mismatched += i >= on.outputs.size() || on.outputs[i] != off.outputs[i];
  const double speedup = ratio(on.decode_tok_s, off.decode_tok_s);
  const nlohmann::json stj = spec_json(on.spec);
  std::fprintf(stderr,
               "latency, %s speculation (k=%lld)%s: decode %.1f tok/s with speculation vs %.1f without (%.2fx); "
               "acceptance %.3f of %lld draft tokens (%.3f per token), mean accepted length %.2f\n",
               e.config().speculative_config.method.c_str(),
               static_cast<long long>(e.config().speculative_config.num_speculative_tokens),
               a.repeat > 1 ? ", repeating prompt" : "", on.decode_tok_s, off.decode_tok_s, speedup,
               stj["spec_acceptance_rate"].get<double>(), static_cast<long long>(on.spec.num_draft_tokens),
               stj["spec_per_token_acceptance"].get<double>(), stj["spec_mean_accepted_length"].get<double>());
  out["speculative_config"] = e.config().speculative_config.to_json();
  out["without_speculation"] = off.json();
  out["with_speculation"] = on.json();
  out.update(on.json());  // the mode's usual keys: the engine as configured
  out["decode_speedup"] = speedup;
  out.update(stj);
  out["outputs_identical"] = mismatched == 0;
  out["mismatched_outputs"] = mismatched;
  return out;
}

}  // namespace nanovllm::cli
