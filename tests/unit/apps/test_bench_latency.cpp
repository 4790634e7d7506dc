// `nanovllm bench --latency` (apps/nanovllm/bench_latency.h) on the tiny fixture (CPU): the
// repeating prompt repeats its segment; with n-gram speculation configured the mode runs the
// requests without, then with it in one engine, the outputs identical, the drafter back after.
#include <gtest/gtest.h>

#include "bench_latency.h"
#include "nanovllm/utils/error.h"
#include "tiny_engine.h"

using namespace nanovllm;

TEST(BenchLatency, TheRepeatingPromptRepeatsARandomSegment) {
  LLMEngine e(test::tiny_cfg());
  cli::LatencyArgs a;
  a.prompt_len = 100;
  a.repeat = 4;
  const std::vector<int32_t> p = cli::latency_prompt(e, a);
  ASSERT_EQ(p.size(), 100u);
  for (size_t i = 25; i < p.size(); ++i) ASSERT_EQ(p[i], p[i - 25]) << i;
  EXPECT_NE(std::vector<int32_t>(p.begin(), p.begin() + 12), std::vector<int32_t>(p.begin() + 12, p.begin() + 24));
  a.repeat = 1;
  const std::vector<int32_t> random = cli::latency_prompt(e, a);
  EXPECT_EQ(std::vector<int32_t>(random.begin(), random.begin() + 25), std::vector<int32_t>(p.begin(), p.begin() + 25))
      << "the same draws: the segment is the random prompt's start";
  EXPECT_NE(random, p);
  a.repeat = 101;
  EXPECT_THROW(cli::latency_prompt(e, a), UserError);
}

TEST(BenchLatency, NgramOnARepeatingPromptAgainstNoSpeculation) {
  EngineConfig cfg = test::tiny_cfg();
  cfg.enable_prefix_caching = false;  // as bench sets it
  cfg.speculative_config = SpeculativeConfig::parse(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4})", "t");
  LLMEngine e(cfg);
  cli::LatencyArgs a;
  a.prompt_len = 96;
  a.output_len = 40;
  a.repeat = 6;
  const nlohmann::json j = cli::latency(e, a);
  EXPECT_TRUE(e.speculating()) << "the drafter is back after the pass without it";
  EXPECT_NE(j.at("prompt").get<std::string>().find("repeating prompt: a random 16-token segment"), std::string::npos);
  EXPECT_GT(j.at("without_speculation").at("decode_tok_s").get<double>(), 0);
  EXPECT_GT(j.at("with_speculation").at("decode_tok_s").get<double>(), 0);
  EXPECT_GT(j.at("decode_speedup").get<double>(), 0);
  EXPECT_TRUE(j.at("outputs_identical").get<bool>()) << j.dump();
  // Three requests: drafts were proposed (the context repeats) and judged.
  EXPECT_GT(j.at("spec_verify_rows").get<int64_t>(), 0) << j.dump();
  const int64_t drafted = j.at("spec_draft_tokens").get<int64_t>(),
                accepted = j.at("spec_accepted_tokens").get<int64_t>();
  EXPECT_GE(drafted, accepted);
  EXPECT_DOUBLE_EQ(j.at("spec_acceptance_rate").get<double>(), drafted > 0 ? double(accepted) / double(drafted) : 0.0);
}
