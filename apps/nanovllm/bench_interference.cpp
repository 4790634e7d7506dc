#include "bench_interference.h"

#include <algorithm>
#include <map>

#include "latency_stats.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/python_random.h"

namespace nanovllm::cli {
namespace {

std::vector<int32_t> random_prompt(PythonRandom& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = int32_t(rng.randint(0, std::min<int64_t>(vocab - 1, 100000)));
  return p;
}

SamplingParams fixed_length(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.max_tokens = max_tokens;
  return sp;
}

// Seconds from adding the prompt to its first token, stepping the engine (other requests too).
double time_to_first_token(LLMEngine& e, int64_t id, double t0, const std::function<void(const StepResult&)>& each) {
  for (;;) {
    const StepResult r = e.step();
    const double t = now_seconds();
    if (each) each(r);
    for (auto& [rid, tok] : r.new_tokens)
      if (rid == id) return t - t0;
    if (!e.has_unfinished()) throw Error("bench --interference: the long prompt finished without a token");
  }
}

}  // namespace

nlohmann::json interference(LLMEngine& e, const InterferenceArgs& a) {
  if (a.streams < 1 || a.context < 1 || a.prompt_len < 1)
    throw UserError("bench --interference: --interference-streams, --interference-context and "
                    "--interference-prompt-len must be positive");
  const int64_t need = a.prompt_len + 1;
  if (need > e.config().max_model_len)
    throw UserError("bench --interference: a prompt of " + std::to_string(a.prompt_len) +
                    " tokens does not fit max_model_len " + std::to_string(e.config().max_model_len));
  const int64_t vocab = e.model_config().vocab_size;
  PythonRandom rng(3);

  // 1. Alone: a warm-up long prompt, then the measured one.
  double ttft_alone = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const double t0 = now_seconds();
    const int64_t id = e.add_request(random_prompt(rng, a.prompt_len, vocab), fixed_length(1));
    ttft_alone = time_to_first_token(e, id, t0, nullptr);
    while (e.has_unfinished()) e.step();
  }

  // 2. Streams in steady decode. Their outputs outlast the long prefill (aborted afterwards).
  const int stream_tokens = int(std::max<int64_t>(1, std::min<int64_t>(100000, e.config().max_model_len - a.context)));
  std::map<int64_t, std::vector<double>> token_times;  // stream id -> when each token came
  for (int64_t i = 0; i < a.streams; ++i)
    token_times[e.add_request(random_prompt(rng, a.context, vocab), fixed_length(stream_tokens))];
  auto record = [&](const StepResult& r) {
    const double t = now_seconds();
    for (auto& [id, tok] : r.new_tokens) {
      auto it = token_times.find(id);
      if (it != token_times.end()) it->second.push_back(t);
    }
  };
  while (e.scheduler_stats().waiting > 0) record(e.step());
  for (int i = 0; i < 3; ++i) record(e.step());
  std::vector<double> baseline;  // steady decode steps
  for (int i = 0; i < 10; ++i) {
    const StepResult r = e.step();
    record(r);
    baseline.push_back(r.seconds);
  }
  for (auto& [id, times] : token_times)
    if (times.size() < 10) throw Error("bench --interference: stream " + std::to_string(id) + " is not decoding");
  // Warm-up of the step shapes to come (a server has met them before): one prompt of a budget's
  // length (or the long prompt's, if shorter) read alongside the streams.
  {
    const int64_t n = std::min(a.prompt_len, e.config().max_num_batched_tokens);
    const int64_t id = e.add_request(random_prompt(rng, n, vocab), fixed_length(1));
    time_to_first_token(e, id, now_seconds(), record);
    for (int i = 0; i < 3; ++i) record(e.step());
  }

  // 3. The long prompt arrives.
  const double t_arrive = now_seconds();
  std::map<int64_t, size_t> before;  // tokens each stream had when it arrived
  for (auto& [id, times] : token_times) before[id] = times.size();
  const int64_t long_id = e.add_request(random_prompt(rng, a.prompt_len, vocab), fixed_length(1));
  int64_t steps = 0;
  const double ttft = time_to_first_token(e, long_id, t_arrive, [&](const StepResult& r) {
    record(r);
    ++steps;
  });
  const double t_first = t_arrive + ttft;
  // Gaps of each stream from its last token before the arrival to its first after the long
  // prompt's first token (that one included: it may have waited for the whole prefill).
  record(e.step());
  std::vector<double> itls;
  for (auto& [id, times] : token_times) {
    for (size_t k = before[id]; k < times.size(); ++k) {
      itls.push_back(times[k] - times[k - 1]);
      if (times[k] >= t_first) break;
    }
  }
  for (auto& [id, times] : token_times) e.abort(id);
  while (e.has_unfinished()) e.step();

  const Dist d = distribution(itls), base = distribution(baseline);
  nlohmann::json out = {{"mode", "interference"},
                        {"streams", a.streams},
                        {"stream_context_tokens", a.context},
                        {"long_prompt_tokens", a.prompt_len},
                        {"chunked_prefill", e.config().enable_chunked_prefill},
                        {"max_num_batched_tokens", e.config().max_num_batched_tokens},
                        {"ttft_alone_ms", ttft_alone * 1e3},
                        {"ttft_with_streams_ms", ttft * 1e3},
                        {"ttft_ratio", ttft / ttft_alone},
                        {"steps_during_prefill", steps},
                        {"itl_samples", int64_t(itls.size())},
                        {"baseline_decode_step_ms_median", base.median * 1e3},
                        {"max_itl_ms", d.max * 1e3}};
  add_dist(out, "itl", itls);
  return out;
}

}  // namespace nanovllm::cli
