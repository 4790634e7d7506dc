// The acceptance-controlled benchmark mode (bench_acceptance.h).
#include "bench_acceptance.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "bench_spec_stats.h"
#include "latency_stats.h"
#include "nanovllm/spec/controlled_drafter.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/progress.h"

namespace nanovllm::cli {
namespace {

struct Pass {
  double seconds = 0, decode_seconds = 0;
  int64_t decode_tokens = 0, generated = 0;
  std::vector<std::vector<int32_t>> outputs;  // by request index
  SpecDecodeStats spec;                       // this pass's counters
  nlohmann::json json(const BenchWorkload& w) const {
    return {{"seconds", seconds},
            {"output_tok_s", double(w.output_tokens) / seconds},
            {"decode_seconds", decode_seconds},
            {"decode_tok_s", decode_seconds > 0 ? double(decode_tokens) / decode_seconds : 0.0}};
  }
};

// drafter: null for the baseline; else each request's record (prompt + reference output) is
// registered with it under the engine's id.
Pass run_pass(LLMEngine& e, const BenchWorkload& w, AcceptanceControlledDrafter* drafter, const Pass* reference) {
  Pass p;
  p.outputs.resize(w.prompts.size());
  const SpecDecodeStats s0 = e.scheduler_stats().spec;
  const double t0 = now_seconds();
  std::map<int64_t, size_t> index_of;
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    const int64_t id = e.add_request(w.prompts[i], w.params[i]);
    index_of[id] = i;
    if (!drafter) continue;
    std::vector<int32_t> record = w.prompts[i];
    record.insert(record.end(), reference->outputs[i].begin(), reference->outputs[i].end());
    drafter->expect(id, std::move(record));
  }
  ProgressBar bar(int64_t(w.prompts.size()), true);
  while (e.has_unfinished()) {
    const StepResult r = e.step();
    p.generated += int64_t(r.new_tokens.size());
    if (r.num_prefill_tokens == 0) {
      p.decode_seconds += r.seconds;
      p.decode_tokens += int64_t(r.new_tokens.size());
    }
    bar.on_step(r.is_prefill, r.num_tokens, r.seconds);
    for (const RequestOutput& o : r.finished) {
      bar.on_finished();
      p.outputs[index_of.at(o.request_id)] = o.token_ids;
    }
  }
  bar.done();
  p.seconds = now_seconds() - t0;
  p.spec = spec_since(e, s0);
  if (p.generated != w.output_tokens)
    throw Error("bench: generated " + std::to_string(p.generated) + " tokens, expected " +
                std::to_string(w.output_tokens));
  return p;
}

}  // namespace

nlohmann::json acceptance_controlled(LLMEngine& e, BenchWorkload w, const AcceptanceArgs& a) {
  // Seeded requests: the pass with speculation emits the recorded tokens (outputs do not depend on
  // speculation for a given seed, spec/verification.h).
  for (size_t i = 0; i < w.params.size(); ++i) w.params[i].seed = int64_t(i);
  // The drafter of --speculative-config (a draft model, n-gram) runs for its cost; its proposals
  // are replaced (its disable_by_batch_size applies).
  std::unique_ptr<Drafter> configured = e.take_drafter();
  const int64_t k = configured ? configured->num_speculative_tokens() : a.num_speculative_tokens;
  const bool with_config_drafter = configured != nullptr;
  auto owned = std::make_unique<AcceptanceControlledDrafter>(k, a.alpha, e.model_config().vocab_size, a.seed,
                                                             std::move(configured));
  AcceptanceControlledDrafter* drafter = owned.get();
  warm_up(e, w);
  const Pass base = run_pass(e, w, nullptr, nullptr);
  // Every step drafts in the record and measured passes (their step shapes must match); the
  // backoff's effect is the last pass's, at acceptance 0.
  const bool backoff = e.draft_backoff();
  // A pass at alpha 0 whose drafter keeps drafting off the record (controlled_drafter.h,
  // set_stop_on_divergence), with the backoff on or off.
  auto pass_at_zero = [&](uint64_t seed, bool with_backoff, const Pass& reference) {
    auto zero = std::make_unique<AcceptanceControlledDrafter>(k, 0.0, e.model_config().vocab_size, seed);
    zero->set_stop_on_divergence(false);
    AcceptanceControlledDrafter* zero_drafter = zero.get();
    e.set_drafter(std::move(zero));  // refused (UserError) where speculation cannot run
    e.set_draft_backoff(with_backoff);
    return run_pass(e, w, zero_drafter, &reference);
  };
  // The record: k drafts verified every step, as the measured pass does; it is also speculation's
  // cost at acceptance 0.
  const Pass rec = pass_at_zero(a.seed + 1, false, base);
  e.set_drafter(std::move(owned));
  const Pass spec = run_pass(e, w, drafter, &rec);
  const int64_t diverged = drafter->num_diverged();
  // Acceptance 0 as a user meets it: drafts never stand, the backoff (when configured) on.
  std::optional<Pass> zero_backoff;
  if (backoff) zero_backoff = pass_at_zero(a.seed + 2, true, rec);
  e.set_drafter(nullptr);
  e.set_draft_backoff(backoff);
  int64_t mismatched = 0;
  int64_t record_mismatched = 0;  // the record against plain decoding: kernels' rounding (GPU)
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    mismatched += rec.outputs[i] != spec.outputs[i];
    record_mismatched += rec.outputs[i] != base.outputs[i];
  }
  char label[256];
  std::snprintf(
      label, sizeof label,
      "acceptance-controlled, alpha=%.2f, k=%lld: drafts are the target's own continuation (recorded at alpha 0), "
      "each token corrupted with probability %.2f",
      a.alpha, static_cast<long long>(k), 1.0 - a.alpha);
  if (with_config_drafter)
    std::snprintf(label + std::strlen(label), sizeof label - std::strlen(label), "; the %s drafter runs for its cost",
                  e.config().speculative_config.method.c_str());
  const nlohmann::json stj = spec_json(spec.spec);
  const double per_token = stj["spec_per_token_acceptance"].get<double>();
  const double mean_len = stj["spec_mean_accepted_length"].get<double>();
  const nlohmann::json bj = base.json(w), sj = spec.json(w), zj = rec.json(w);
  const double speedup = ratio(sj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>());
  std::fprintf(stderr,
               "%s\n  decode %.1f tok/s with speculation vs %.1f without (%.2fx); acceptance %.3f per token, "
               "mean accepted length %.2f; at acceptance 0: %.1f tok/s (%.2fx) drafting every step\n",
               label, sj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>(), speedup, per_token, mean_len,
               zj["decode_tok_s"].get<double>(),
               ratio(zj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>()));
  const nlohmann::json kj = zero_backoff ? zero_backoff->json(w) : nlohmann::json();
  if (zero_backoff)
    std::fprintf(stderr, "  at acceptance 0 with the drafting backoff: %.1f tok/s (%.2fx)\n",
                 kj["decode_tok_s"].get<double>(),
                 ratio(kj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>()));
  nlohmann::json out = {
      {"mode", "acceptance_controlled"},
      {"label", label},
      {"alpha", a.alpha},
      {"num_speculative_tokens", k},
      {"drafter_for_cost", with_config_drafter ? e.config().speculative_config.to_json() : ""},
      {"num_seqs", int64_t(w.prompts.size())},
      {"prompt_tokens", w.prompt_tokens},
      {"output_tokens", w.output_tokens},
      {"without_speculation", bj},
      {"with_speculation", sj},
      // The recording pass: k drafts a step, all corrupted (no drafter for cost in it).
      {"at_acceptance_0", zj},
      {"decode_speedup_at_acceptance_0", ratio(zj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>())},
      // Acceptance 0 with the drafting backoff (spec/draft_backoff.h), when configured.
      {"at_acceptance_0_with_backoff", kj},
      {"decode_speedup_at_acceptance_0_with_backoff",
       zero_backoff ? ratio(kj["decode_tok_s"].get<double>(), bj["decode_tok_s"].get<double>()) : 0.0},
      {"decode_speedup", speedup},
      {"output_speedup", ratio(sj["output_tok_s"].get<double>(), bj["output_tok_s"].get<double>())},
      {"diverged_sequences", diverged},
      {"outputs_identical", mismatched == 0},
      {"mismatched_outputs", mismatched},
      {"record_equals_plain_decoding", record_mismatched == 0},
      {"record_mismatched_outputs", record_mismatched}};
  out.update(stj);  // the measured pass's; the per-token acceptance estimates alpha
  return out;
}

}  // namespace nanovllm::cli
