// Speculative decoding's counters over a benchmark pass (bench_spec_stats.h).
#include "bench_spec_stats.h"

namespace nanovllm::cli {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

SpecDecodeStats spec_since(const LLMEngine& e, const SpecDecodeStats& before) {
  const SpecDecodeStats now = e.scheduler_stats().spec;
  SpecDecodeStats d;
  d.num_drafts = now.num_drafts - before.num_drafts;
  d.num_draft_tokens = now.num_draft_tokens - before.num_draft_tokens;
  d.num_accepted_tokens = now.num_accepted_tokens - before.num_accepted_tokens;
  d.num_rejections = now.num_rejections - before.num_rejections;
  return d;
}

nlohmann::json spec_json(const SpecDecodeStats& st) {
  return {{"spec_verify_rows", st.num_drafts},
          {"spec_draft_tokens", st.num_draft_tokens},
          {"spec_accepted_tokens", st.num_accepted_tokens},
          {"spec_acceptance_rate", ratio(double(st.num_accepted_tokens), double(st.num_draft_tokens))},
          {"spec_per_token_acceptance",
           ratio(double(st.num_accepted_tokens), double(st.num_accepted_tokens + st.num_rejections))},
          {"spec_mean_accepted_length", 1.0 + ratio(double(st.num_accepted_tokens), double(st.num_drafts))}};
}

}  // namespace nanovllm::cli
