// `nanovllm bench`: throughput on nano-vllm's bench.py workload (Python random.seed(0): num_seqs
// prompts of randint(100, max_input_len) tokens drawn from randint(0, 10000), outputs of
// randint(100, max_output_len) tokens, temperature 0.6, ignore_eos), a batch-1 latency mode
// (bench_latency.h: TTFT of a 1,024-token prompt, decode tok/s at 1K context; with and without
// speculation when configured, on a repeating prompt with --latency-repeat) and the long-prompt interference
// mode (bench_interference.h) and speculative decoding's acceptance-controlled mode
// (bench_acceptance.h). Prints one JSON object. --shared-prefix-len N makes the throughput
// workload chat-like: every prompt starts with the same N-token system prompt (also the warm-up's),
// and the JSON gives the prefix cache's hit rate over the run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_acceptance.h"
#include "bench_embed.h"
#include "bench_interference.h"
#include "bench_latency.h"
#include "bench_workload.h"
#include "commands.h"
#include "engine_flags.h"
#include "latency_stats.h"
#include "nanovllm/backends/profiling_backend.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/frontend/tensor_parallel_start.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/progress.h"
#include "nanovllm/utils/python_random.h"

namespace nanovllm::cli {
namespace {

struct BenchArgs {
  EngineFlags engine;
  int64_t num_seqs = 256, max_input_len = 1024, max_output_len = 1024;
  bool latency = false;
  bool interference = false;
  InterferenceArgs interference_args;
  AcceptanceArgs acceptance;  // --spec-acceptance
  bool embed = false;         // embeddings throughput of a pooling model (bench_embed.h)
  EmbedBenchArgs embed_args;
  int64_t profile_decode = 0;   // batch size for the per-op decode breakdown (0 = off)
  int64_t profile_prefill = 0;  // prompt length for the per-op prefill breakdown (0 = off)
  LatencyArgs latency_args;     // --latency-*
  // Applied to every request of the throughput workload (the cost of logprobs and penalties).
  int logprobs = -1;
  int64_t shared_prefix_len = 0;  // throughput: a system prompt of this many tokens before every prompt
  float repetition_penalty = 1.0f, frequency_penalty = 0.0f;
  // Throughput and latency: every request's output constrained by this JSON Schema (a file).
  std::string json_schema_file;
  StructuredOutputs structured;  // read from it
};

// Output tok/s at the DESIGN.md roofline for this workload on one H100 (Qwen3-0.6B, bf16).
constexpr double kRooflineTokS = 24600;

nlohmann::json throughput(LLMEngine& e, const BenchArgs& a) {
  BenchWorkload w = bench_py_workload(e, a.num_seqs, a.max_input_len, a.max_output_len, a.shared_prefix_len);
  for (SamplingParams& sp : w.params) {
    if (a.logprobs >= 0) sp.logprobs = a.logprobs;
    sp.repetition_penalty = a.repetition_penalty;
    sp.frequency_penalty = a.frequency_penalty;
    sp.structured_outputs = a.structured;
    sp.validate();
  }
  const auto& prompts = w.prompts;
  const auto& params = w.params;
  const int64_t prompt_tokens = w.prompt_tokens, output_tokens = w.output_tokens;
  warm_up(e, w);
  const SchedulerStats s0 = e.scheduler_stats();
  const double t0 = now_seconds();
  for (int64_t i = 0; i < a.num_seqs; ++i) e.add_request(prompts[size_t(i)], params[size_t(i)]);
  int64_t generated = 0, requests_hit = 0;
  double prefill_s = 0, decode_s = 0;
  ProgressBar bar(a.num_seqs, true);  // stderr, and only when it is a terminal
  while (e.has_unfinished()) {
    auto r = e.step();
    generated += int64_t(r.new_tokens.size());
    (r.is_prefill ? prefill_s : decode_s) += r.seconds;
    bar.on_step(r.is_prefill, r.num_tokens, r.seconds);
    for (const RequestOutput& o : r.finished) {
      bar.on_finished();
      requests_hit += o.num_cached_prompt_tokens > 0;
    }
  }
  bar.done();
  const double secs = now_seconds() - t0;
  const SchedulerStats s1 = e.scheduler_stats();
  const int64_t queried = s1.prefix_query_tokens - s0.prefix_query_tokens,
                hit = s1.prefix_hit_tokens - s0.prefix_hit_tokens;
  if (generated != output_tokens)
    throw Error("bench: generated " + std::to_string(generated) + " tokens, expected " + std::to_string(output_tokens));
  return {{"mode", "throughput"},
          {"num_seqs", a.num_seqs},
          {"prompt_tokens", prompt_tokens},
          {"output_tokens", output_tokens},
          {"seconds", secs},
          {"prefill_seconds", prefill_s},
          {"decode_seconds", decode_s},
          {"output_tok_s", double(output_tokens) / secs},
          {"total_tok_s", double(prompt_tokens + output_tokens) / secs},
          {"preemptions", e.scheduler_stats().preemptions},
          {"shared_prefix_len", a.shared_prefix_len},
          {"prefix_cache_hit_rate", queried > 0 ? double(hit) / double(queried) : 0.0},
          {"prefix_cache_hit_tokens", hit},
          {"requests_with_prefix_hits", requests_hit},
          {"logprobs", a.logprobs},
          {"repetition_penalty", a.repetition_penalty},
          {"frequency_penalty", a.frequency_penalty},
          {"json_schema", a.json_schema_file},
          {"spec_draft_tokens", s1.spec.num_draft_tokens - s0.spec.num_draft_tokens},
          {"spec_accepted_tokens", s1.spec.num_accepted_tokens - s0.spec.num_accepted_tokens},
          // Drafts that stood / drafts verified (0 without speculative decoding).
          {"spec_acceptance_rate", s1.spec.num_draft_tokens > s0.spec.num_draft_tokens
                                       ? double(s1.spec.num_accepted_tokens - s0.spec.num_accepted_tokens) /
                                             double(s1.spec.num_draft_tokens - s0.spec.num_draft_tokens)
                                       : 0.0},
          {"roofline_fraction_h100_qwen3_0_6b", double(output_tokens) / secs / kRooflineTokS}};
}

// The profiled ops, slowest first, per step of `steps`.
nlohmann::json ops_table(const ProfilingBackend& prof, int steps) {
  double total = 0;
  for (auto& [op, st] : prof.stats()) total += st.seconds;
  std::vector<std::pair<double, std::string>> order;
  for (auto& [op, st] : prof.stats()) order.emplace_back(st.seconds, op);
  std::sort(order.rbegin(), order.rend());
  nlohmann::json ops = nlohmann::json::array();
  for (auto& [secs, op] : order)
    ops.push_back({{"op", op},
                   {"calls_per_step", double(prof.stats().at(op).calls) / steps},
                   {"ms_per_step", secs / steps * 1e3},
                   {"fraction", secs / total}});
  return ops;
}

// Per-op time of one prefill of N prompt tokens (ops synchronized one by one; one step when
// --max-num-batched-tokens >= N, else its chunks): where time to first token goes.
nlohmann::json profile_prefill(LLMEngine& e, const BenchArgs& a) {
  auto* prof = dynamic_cast<ProfilingBackend*>(&e.model_runner().backend());
  if (!prof) throw Error("bench: profiling backend missing");
  SamplingParams sp;
  sp.temperature = 0;
  sp.ignore_eos = true;
  sp.max_tokens = 1;
  e.add_request({5, 6, 7}, sp);  // warm-up
  while (e.has_unfinished()) e.step();
  PythonRandom rng(3);
  std::vector<int32_t> p(size_t(a.profile_prefill));
  for (auto& t : p) t = int32_t(rng.randint(0, bench_max_token_id(e)));
  prof->reset();
  e.add_request(p, sp);
  double wall = 0;
  int steps = 0;
  while (e.has_unfinished()) {
    wall += e.step().seconds;
    ++steps;
  }
  return {{"mode", "profile_prefill"},
          {"prompt_tokens", a.profile_prefill},
          {"steps", steps},
          {"ms_profiled", wall * 1e3},
          {"ops", ops_table(*prof, 1)}};
}

// Per-op time of one decode step at batch B (ops synchronized one by one, so the sum exceeds a
// graph-replayed step by the launch gaps): B requests of 512-token prompts, prefilled first.
nlohmann::json profile_decode(LLMEngine& e, const BenchArgs& a) {
  auto* prof = dynamic_cast<ProfilingBackend*>(&e.model_runner().backend());
  if (!prof) throw Error("bench: profiling backend missing");
  PythonRandom rng(2);
  SamplingParams sp;
  sp.temperature = 0.6f;
  sp.ignore_eos = true;
  sp.max_tokens = 64;
  for (int64_t i = 0; i < a.profile_decode; ++i) {
    std::vector<int32_t> p(512);
    for (auto& t : p) t = int32_t(rng.randint(0, bench_max_token_id(e)));
    e.add_request(p, sp);
  }
  while (e.scheduler_stats().waiting > 0) e.step();
  for (int i = 0; i < 3; ++i) e.step();  // warm decode
  prof->reset();
  const int steps = 10;
  double wall = 0;
  int64_t batch = 0;
  for (int i = 0; i < steps; ++i) {
    auto r = e.step();
    wall += r.seconds;
    batch = r.num_tokens;
  }
  nlohmann::json ops = ops_table(*prof, steps);
  while (e.has_unfinished()) e.step();
  return {{"mode", "profile_decode"},
          {"batch", batch},
          {"context_tokens", 512 + 3},
          {"step_ms_profiled", wall / steps * 1e3},
          {"ops", ops}};
}

void run(BenchArgs a) {
  if (a.num_seqs < 1 || a.max_input_len < 100 || a.max_output_len < 100)
    throw UserError(
        "bench: --num-seqs must be >= 1 and --max-input-len/--max-output-len >= 100 (lengths are randint(100, max))");
  EngineConfig cfg = a.engine.resolve();
  const bool controlled = a.acceptance.alpha >= 0;
  if (controlled) {
    if (a.acceptance.alpha > 1) throw UserError("bench: --spec-acceptance must be in [0, 1]");
    if (a.acceptance.num_speculative_tokens < 1 || a.acceptance.num_speculative_tokens > 64)
      throw UserError("bench: --spec-tokens must be in [1, 64]");
    if (a.latency || a.interference || a.profile_decode > 0 || a.profile_prefill > 0 || !a.json_schema_file.empty() ||
        a.logprobs >= 0)
      throw UserError(
          "bench: --spec-acceptance runs on the throughput workload (-n 1 for batch-1 decode); it does "
          "not combine with --latency, --interference, --profile-*, --json-schema or --logprobs");
    cfg.enable_prefix_caching = false;  // the second pass would find the first's prompts cached
  }
  // The latency mode's pass with speculation reads the same prompts as the one without.
  if (a.latency && cfg.speculative_config.enabled()) cfg.enable_prefix_caching = false;
  // bench.py runs its workload with LLM(max_model_len=4096); the latency modes take the model's.
  if (!a.latency && !a.interference && a.profile_decode == 0 && a.profile_prefill == 0 && cfg.max_model_len_is_auto())
    cfg.max_model_len = 4096;
  if (a.embed && cfg.runner == RunnerChoice::Auto) cfg.runner = RunnerChoice::Pooling;
  if (a.profile_prefill > 0) cfg.profile_ops = true;
  if (a.profile_decode > 0) {
    cfg.profile_ops = true;
    cfg.max_num_seqs = std::max(cfg.max_num_seqs, a.profile_decode);
  }
  TpStart tp = start_tensor_parallel(cfg, a.engine.starts_other_ranks());
  if (tp.worker) return run_worker(cfg, a.engine.spawned());
  print_kernel_options(cfg);
  LLMEngine e(cfg);
  std::unique_ptr<Tokenizer> tokenizer;  // structured outputs match its tokens
  if (!a.json_schema_file.empty()) {
    std::ifstream f(a.json_schema_file);
    if (!f) throw UserError("--json-schema " + a.json_schema_file + ": cannot open file");
    std::stringstream ss;
    ss << f.rdbuf();
    a.structured.kind = StructuredOutputs::Kind::JsonSchema;
    a.structured.text = ss.str();
    a.latency_args.structured = a.structured;
    const std::string dir = find_tokenizer_dir(cfg, a.engine.tokenizer);
    if (dir.empty()) throw UserError("--json-schema needs the model's tokenizer (give --tokenizer DIR)");
    tokenizer = Tokenizer::from_dir(dir);
    e.enable_structured_outputs(tokenizer.get());
  }
  nlohmann::json out =
      controlled ? acceptance_controlled(
                       e, bench_py_workload(e, a.num_seqs, a.max_input_len, a.max_output_len, a.shared_prefix_len),
                       a.acceptance)
      : a.embed               ? embed_throughput(e, a.embed_args)
      : a.profile_decode > 0  ? profile_decode(e, a)
      : a.profile_prefill > 0 ? profile_prefill(e, a)
      : a.interference        ? interference(e, a.interference_args)
      : a.latency             ? latency(e, a.latency_args)
                              : throughput(e, a);
  out["model"] = cfg.model;
  out["device"] = e.model_runner().backend().name();
  out["enforce_eager"] = cfg.enforce_eager;
  out["chunked_prefill"] = cfg.enable_chunked_prefill;
  out["prefix_caching"] = cfg.enable_prefix_caching;
  out["async_scheduling"] = e.async_scheduling();
  out["kv_cache_dtype"] = kv_cache_dtype_name(cfg.kv_cache_dtype);
  out["kv_cache_blocks"] = e.model_runner().num_kv_blocks();  // the KV capacity (quantized weights free memory)
  out["max_num_batched_tokens"] = cfg.max_num_batched_tokens;
  if (e.model_runner().backend().device() == Device::CUDA) out["kernel_options"] = cfg.kernels.to_string();
  std::cout << out.dump() << std::endl;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "benchmark throughput (bench.py workload) or batch-1 latency");
  a->engine.add_to(*cmd);
  cmd->add_option("-n,--num-seqs", a->num_seqs, "requests in the throughput workload (bench.py: 256)");
  cmd->add_option("--max-input-len", a->max_input_len, "longest prompt (bench.py: 1024)");
  cmd->add_option("--max-output-len", a->max_output_len, "longest output (bench.py: 1024)");
  cmd->add_flag("--latency", a->latency, "batch-1 latency mode instead of throughput");
  cmd->add_option("--profile-decode", a->profile_decode, "per-op time of a decode step at this batch size");
  cmd->add_option("--profile-prefill", a->profile_prefill,
                  "per-op time of the prefill of one prompt of this many tokens (set --max-num-batched-tokens >= it "
                  "for one step)");
  cmd->add_option("--latency-prompt-len", a->latency_args.prompt_len, "latency mode: prompt tokens");
  cmd->add_option("--latency-output-len", a->latency_args.output_len, "latency mode: output tokens");
  cmd->add_option("--latency-repeat", a->latency_args.repeat,
                  "latency mode: the prompt is a random segment repeated R times (a repeating workload, n-gram "
                  "speculation's case); with a --speculative-config the mode runs without then with speculation "
                  "and prints both, the speed-up and the measured acceptance")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--logprobs", a->logprobs, "throughput: every request asks for N logprobs (default: none)");
  cmd->add_option("--repetition-penalty", a->repetition_penalty, "throughput: every request's repetition_penalty");
  cmd->add_option("--frequency-penalty", a->frequency_penalty, "throughput: every request's frequency_penalty");
  cmd->add_option("--shared-prefix-len", a->shared_prefix_len,
                  "throughput: every prompt starts with the same system prompt of N tokens (a chat-like workload; "
                  "the JSON gives the prefix-cache hit rate)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json-schema", a->json_schema_file,
                  "throughput and latency: every request's output follows this JSON Schema (file)");
  cmd->add_option("--spec-acceptance", a->acceptance.alpha,
                  "acceptance-controlled speculative decoding: a pass without speculation, a pass at acceptance 0 "
                  "that records every output, then a pass that drafts them with each token corrupted with "
                  "probability 1 - ALPHA; prints all three (bench.py's workload, seeded; -n 1 for batch-1 decode; a "
                  "--speculative-config drafter, a draft model say, runs for its cost and its "
                  "disable_by_batch_size applies)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spec-tokens", a->acceptance.num_speculative_tokens,
                  "--spec-acceptance: drafts per step (num_speculative_tokens, default 4)");
  cmd->add_flag("--interference", a->interference,
                "interference mode: inter-token latency of running streams while a long prompt is read");
  cmd->add_option("--interference-streams", a->interference_args.streams, "interference mode: running streams");
  cmd->add_option("--interference-context", a->interference_args.context, "interference mode: their prompt tokens");
  cmd->add_option("--interference-prompt-len", a->interference_args.prompt_len,
                  "interference mode: the long prompt's tokens");
  cmd->add_flag("--embed", a->embed,
                "embeddings throughput of a pooling model (--runner pooling implied): inputs/s and tokens/s");
  cmd->add_option("--embed-inputs", a->embed_args.inputs, "embed mode: inputs (default 1000)");
  cmd->add_option("--embed-len", a->embed_args.input_len, "embed mode: tokens per input (default 512)");
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
