// n > 1 choices share their request's immutable data (config/shared_value.h): the engine's
// sequences of all n choices hold one stop-string list (with its automaton), one logit_bias, one
// allowed_token_ids and one bad-words list, the very objects of the caller's SamplingParams, not
// n deep copies (issue 44: a 0.2 MB body with n = 256 cost +0.6 GB). Prints the bytes shared.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/sequence.h"
#include "nanovllm/frontend/request_tracker.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;

TEST(ChoiceSharing, EveryChoiceReadsOneCopyOfTheRequestLists) {
  EngineConfig cfg = test::tiny_cfg();
  cfg.block_size = 16;
  LLMEngine engine(cfg);
  auto tok = Tokenizer::from_dir(test::qwen3_tokenizer_dir());
  RequestTracker tracker(engine, tok.get());

  const int n = 16;
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.seed = 3;
  sp.max_tokens = 8;
  sp.ignore_eos = true;
  sp.n = n;
  std::vector<std::string> stops;
  size_t stop_bytes = 0;
  for (int i = 0; i < 2000; ++i) {
    stops.push_back("never-" + std::to_string(i) + std::string(80, 'z'));
    stop_bytes += stops.back().size();
  }
  sp.stop = std::move(stops);
  std::vector<std::pair<int32_t, float>> bias;
  for (int32_t t = 0; t < 500; ++t) bias.emplace_back(t, 0.5f);
  sp.logit_bias = std::move(bias);
  std::vector<int32_t> allowed;
  for (int32_t t = 3; t < 600; ++t) allowed.push_back(t);
  sp.allowed_token_ids = std::move(allowed);
  sp.bad_words_token_ids = {{5, 6}, {7}};

  tracker.add(test::random_tokens(40, 9), sp, {});
  // Choice 0 first, the others once its prompt is cached; then every choice has its blocks.
  for (int i = 0; i < 20 && engine.live_sequences().size() < size_t(n); ++i) tracker.step();
  const std::vector<const Sequence*> seqs = engine.live_sequences();
  ASSERT_EQ(seqs.size(), size_t(n));
  for (const Sequence* s : seqs) {
    EXPECT_TRUE(s->params.stop.shares_with(sp.stop)) << "sequence " << s->id;
    EXPECT_TRUE(s->params.logit_bias.shares_with(sp.logit_bias)) << "sequence " << s->id;
    EXPECT_TRUE(s->params.allowed_token_ids.shares_with(sp.allowed_token_ids)) << "sequence " << s->id;
    EXPECT_TRUE(s->params.bad_words_token_ids.shares_with(sp.bad_words_token_ids)) << "sequence " << s->id;
    EXPECT_EQ(s->params.stop.size(), 2000u);
    EXPECT_EQ(s->params.n, 1);  // per-choice fields are the choice's own
  }
  // Each choice's seed is seed + j: per-choice values still differ where they should.
  std::set<uint64_t> seeds;
  for (const Sequence* s : seqs) seeds.insert(*s->params.seed);
  EXPECT_EQ(seeds.size(), size_t(n));
  const size_t automaton = sp.stop->automaton().memory_bytes();
  std::printf(
      "n=%d choices share one copy: %zu stop strings (%zu bytes, automaton %zu bytes), %zu logit_bias, "
      "%zu allowed ids; a deep copy per choice would hold %zu bytes more\n",
      n, sp.stop.size(), stop_bytes, automaton, sp.logit_bias.size(), sp.allowed_token_ids.size(),
      size_t(n - 1) * (stop_bytes + 32 * sp.stop.size() + 8 * sp.logit_bias.size() + 4 * sp.allowed_token_ids.size()));
  while (tracker.has_unfinished()) tracker.step();
}
