// Pooling models against sentence-transformers / transformers (CPU, exact arithmetic): the fixtures
// of scripts/make_embedding_fixture.py under tests/fixtures/pooling. Made on the GPU machine with
//   python3 scripts/make_embedding_fixture.py --out tests/fixtures/pooling
// and committed; until then each test is skipped saying so. Embeddings (Sentence-Transformers layout:
// last-token + Normalize, mean without Normalize, Matryoshka cuts) equal the reference to float
// error; the Qwen3-Reranker conversion and a Qwen3ForSequenceClassification head give its scores.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;

namespace {

std::string fixture_dir(const std::string& name) { return test::fixture("pooling/" + name); }

bool load_reference(const std::string& name, nlohmann::json& ref) {
  std::ifstream in(fixture_dir(name) + "/reference.json");
  if (!in) return false;
  ref = nlohmann::json::parse(in);
  return true;
}

#define REQUIRE_FIXTURE(name, ref)                                             \
  if (!load_reference(name, ref))                                              \
  GTEST_SKIP() << "no " << fixture_dir(name)                                   \
               << ": make it with `python3 scripts/make_embedding_fixture.py " \
                  "--out tests/fixtures/pooling` (torch, transformers, sentence-transformers)"

// Every prompt of the reference in one batch; their outputs in order.
std::vector<std::vector<float>> run(LLMEngine& e, const nlohmann::json& ref, PoolingParams p) {
  SamplingParams sp;
  sp.pooling = p;
  std::map<int64_t, size_t> index;
  const auto& prompts = ref["prompts"];
  for (size_t i = 0; i < prompts.size(); ++i) index[e.add_request(prompts[i].get<std::vector<int32_t>>(), sp)] = i;
  std::vector<std::vector<float>> out(prompts.size());
  while (e.has_unfinished())
    for (auto& f : e.step().finished) out[index.at(f.request_id)] = f.pooled;
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  return out;
}

void expect_equal(const std::vector<std::vector<float>>& got, const nlohmann::json& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto w = want[i].get<std::vector<double>>();
    ASSERT_EQ(got[i].size(), w.size()) << "prompt " << i;
    double dot = 0, ng = 0, nw = 0, worst = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      dot += got[i][k] * w[k];
      ng += double(got[i][k]) * got[i][k];
      nw += w[k] * w[k];
      worst = std::max(worst, std::abs(got[i][k] - w[k]));
    }
    EXPECT_LE(worst, tol) << "prompt " << i;
    if (w.size() > 1) EXPECT_GE(dot / std::sqrt(ng * nw), 0.99999) << "prompt " << i;
  }
}

EngineConfig cfg_of(const std::string& name) {
  EngineConfig cfg = test::tiny_cfg(fixture_dir(name));
  cfg.max_num_batched_tokens = 128;  // the long prompts are chunked
  cfg.max_num_seqs = 8;
  cfg.block_size = 16;
  return cfg;
}

}  // namespace

TEST(PoolingFixtures, SentenceTransformersEmbeddings) {
  for (const char* name : {"qwen3-embedding", "qwen3-embedding-mean"}) {
    nlohmann::json ref;
    REQUIRE_FIXTURE(name, ref);
    EngineConfig cfg = cfg_of(name);        // --runner auto: detected from modules.json
    cfg.hf_overrides.is_matryoshka = true;  // as vLLM serves Qwen3-Embedding (its config declares none)
    LLMEngine e(cfg);
    ASSERT_TRUE(e.pooling_model()) << name;
    EXPECT_EQ(e.pooling_model()->normalize, ref["normalize"].get<bool>());
    expect_equal(run(e, ref, {}), ref["outputs"], 2e-5);
    for (auto& [d, want] : ref["dims"].items()) {
      PoolingParams p;
      p.dimensions = std::stoll(d);
      p.normalize = true;
      expect_equal(run(e, ref, p), want, 2e-5);
    }
  }
}

TEST(PoolingFixtures, Qwen3RerankerConversion) {
  nlohmann::json ref;
  REQUIRE_FIXTURE("qwen3-reranker", ref);
  EngineConfig cfg = cfg_of("qwen3-reranker");
  cfg.runner = RunnerChoice::Pooling;
  cfg.hf_overrides = HfOverrides::parse(R"({"architectures": ["Qwen3ForSequenceClassification"],
      "classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": true})",
                                        "--hf-overrides");
  cfg.classifier_token_ids = {ref["no_id"].get<int32_t>(), ref["yes_id"].get<int32_t>()};
  LLMEngine e(cfg);
  expect_equal(run(e, ref, {PoolingTask::Score}), ref["outputs"], 1e-5);
}

TEST(PoolingFixtures, SequenceClassificationHead) {
  nlohmann::json ref;
  REQUIRE_FIXTURE("qwen3-seqcls", ref);
  LLMEngine e(cfg_of("qwen3-seqcls"));  // detected: Qwen3ForSequenceClassification
  ASSERT_TRUE(e.pooling_model() && e.pooling_model()->classify);
  EXPECT_EQ(e.pooling_model()->num_labels, 1);
  expect_equal(run(e, ref, {PoolingTask::Classify}), ref["outputs"], 1e-5);
}
