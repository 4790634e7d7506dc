// The pooling runner on the tiny Qwen3 fixture (CPU, exact arithmetic): LAST / MEAN / CLS equal a
// double-precision pooling of the model's own final hidden states (ModelRunner::hidden_observer),
// normalization and Matryoshka dimensions, batching and chunked prefill changing nothing, the
// blocks all free afterwards, the Qwen3-Reranker conversion (classifier_from_token) equal to the
// generate model's yes/no logits, Sentence-Transformers auto-detection, the refusals, and async
// pooling steps equal to synchronous ones.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::random_tokens;
using test::tiny_cfg;

namespace {

EngineConfig pooling_cfg(PoolingType type, bool normalize,
                         const std::string& model = test::fixture("tiny-qwen3-untied")) {
  EngineConfig cfg = tiny_cfg(model);
  cfg.runner = RunnerChoice::Pooling;
  cfg.pooler_config.pooling_type = type;
  cfg.pooler_config.normalize = normalize;
  return cfg;
}

SamplingParams embed(std::optional<int64_t> dims = std::nullopt) {
  SamplingParams sp;
  sp.pooling = PoolingParams{};
  sp.pooling->dimensions = dims;
  return sp;
}

// Runs every prompt to its end; returns their outputs in order.
std::vector<std::vector<float>> run_all(LLMEngine& e, const std::vector<std::vector<int32_t>>& prompts,
                                        const SamplingParams& sp) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) index[e.add_request(prompts[i], sp)] = i;
  std::vector<std::vector<float>> out(prompts.size());
  while (e.has_unfinished()) {
    StepResult r = e.step();
    EXPECT_TRUE(r.new_tokens.empty());  // pooling requests generate nothing
    for (auto& f : r.finished) {
      EXPECT_TRUE(f.token_ids.empty());
      out[index.at(f.request_id)] = f.pooled;
    }
  }
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  return out;
}

// The rows each sequence of a step computed: [T, H] split by their scheduled tokens.
struct HiddenLog {
  std::map<int64_t, std::vector<std::vector<float>>> rows;  // request id -> its rows, in order
  void attach(LLMEngine& e) {
    const int64_t H = e.model_config().hidden_size;
    e.model_runner().hidden_observer = [this, H](const ScheduledBatch& b, const std::vector<float>& h) {
      size_t r = 0;
      for (const Sequence* s : b.seqs)
        for (int64_t t = 0; t < s->num_scheduled_tokens; ++t, ++r)
          rows[s->id].emplace_back(h.begin() + int64_t(r * size_t(H)), h.begin() + int64_t((r + 1) * size_t(H)));
    };
  }
};

std::vector<float> reference(PoolingType type, const std::vector<std::vector<float>>& rows) {
  const size_t H = rows[0].size();
  std::vector<double> sum(H, 0.0);
  if (type == PoolingType::Mean) {
    for (auto& r : rows)
      for (size_t k = 0; k < H; ++k) sum[k] += r[k];
    for (double& x : sum) x /= double(rows.size());
  } else {
    const auto& r = type == PoolingType::Cls ? rows.front() : rows.back();
    for (size_t k = 0; k < H; ++k) sum[k] = r[k];
  }
  return {sum.begin(), sum.end()};
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], tol) << "at " << k;
}

// A copy of the tiny fixture whose config.json gets `extra` and whose directory gets `files`.
void copy_fixture(const test::TempDir& d, const nlohmann::json& extra,
                  const std::map<std::string, std::string>& files = {}) {
  namespace fs = std::filesystem;
  for (auto& f : fs::directory_iterator(test::fixture("tiny-qwen3-untied")))
    fs::copy_file(f.path(), d.dir / f.path().filename());
  std::ifstream in(d.path("config.json"));
  nlohmann::json c = nlohmann::json::parse(in);
  c.update(extra);
  std::ofstream(d.path("config.json")) << c.dump();
  for (auto& [name, text] : files) {
    fs::create_directories((d.dir / name).parent_path());
    std::ofstream(d.path(name)) << text;
  }
}

}  // namespace

TEST(Pooling, LastMeanClsEqualDoublePoolingOfTheHiddenStates) {
  for (PoolingType type : {PoolingType::Last, PoolingType::Mean, PoolingType::Cls}) {
    for (int64_t budget : {int64_t(4096), int64_t(40)}) {  // one step; chunks of 40 tokens
      EngineConfig cfg = pooling_cfg(type, false);
      cfg.max_num_batched_tokens = budget;
      cfg.max_num_seqs = 8;
      cfg.block_size = 16;
      LLMEngine e(cfg);
      HiddenLog log;
      log.attach(e);
      const std::vector<std::vector<int32_t>> prompts = {random_tokens(97, 1), random_tokens(5, 2)};
      auto out = run_all(e, prompts, embed());
      ASSERT_EQ(log.rows.size(), 2u);
      size_t i = 0;
      for (auto& [id, rows] : log.rows) {
        ASSERT_EQ(rows.size(), prompts[i].size());
        const std::vector<float> want = reference(type, rows);
        ASSERT_EQ(out[i].size(), want.size());
        for (size_t k = 0; k < want.size(); ++k) EXPECT_FLOAT_EQ(out[i][k], want[k]) << pooling_type_name(type);
        ++i;
      }
    }
  }
}

TEST(Pooling, BatchedAndChunkedEqualOneAtATime) {
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(130, 3), random_tokens(17, 4), random_tokens(64, 5)};
  // MEAN: every row of every chunk counts (LAST over chunks: LastMeanClsEqual... at a budget of 40).
  for (PoolingType type : {PoolingType::Mean}) {
    LLMEngine batched(pooling_cfg(type, true));
    auto all = run_all(batched, prompts, embed());
    EngineConfig chunked_cfg = pooling_cfg(type, true);
    chunked_cfg.max_num_batched_tokens = 48;
    chunked_cfg.max_num_seqs = 8;
    chunked_cfg.block_size = 16;
    LLMEngine chunked(chunked_cfg);
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto alone = run_all(batched, {prompts[i]}, embed());
      expect_close(all[i], alone[0], 1e-5f);
      auto parts = run_all(chunked, {prompts[i]}, embed());
      expect_close(parts[0], alone[0], 1e-5f);
    }
  }
}

// Async pooling steps (async scheduling on: CUDA's default): step N launched before step N - 1's
// rows are pooled. Chunked prompts (their pool sums span steps in flight), several steps of
// sequences, every pooling type: the outputs equal the synchronous engine's bit for bit, each
// comes one step() later, and the blocks are all back at the end.
TEST(Pooling, AsyncStepsEqualSynchronousOnes) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 9; ++i) prompts.push_back(random_tokens(5 + 23 * i % 101, uint32_t(20 + i)));
  for (PoolingType type : {PoolingType::Last, PoolingType::Mean, PoolingType::Cls}) {
    std::vector<std::vector<float>> out[2];
    for (int async = 0; async < 2; ++async) {
      EngineConfig cfg = pooling_cfg(type, type != PoolingType::Cls);
      cfg.max_num_batched_tokens = 48;
      cfg.max_num_seqs = 4;
      cfg.block_size = 16;
      cfg.async_scheduling = async == 1;
      LLMEngine e(cfg);
      ASSERT_EQ(e.async_scheduling(), async == 1);
      out[async] = run_all(e, prompts, embed());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_FALSE(out[0][i].empty());
      EXPECT_EQ(out[1][i], out[0][i]) << pooling_type_name(type) << " prompt " << i;
    }
  }
  // The first step's outputs come with the second step() (one prompt: one step).
  EngineConfig cfg = pooling_cfg(PoolingType::Last, true);
  cfg.async_scheduling = true;
  LLMEngine e(cfg);
  e.add_request(random_tokens(12, 7), embed());
  StepResult first = e.step();
  EXPECT_TRUE(first.finished.empty());
  EXPECT_TRUE(e.has_unfinished());
  StepResult second = e.step();
  ASSERT_EQ(second.finished.size(), 1u);
  EXPECT_FALSE(second.finished[0].pooled.empty());
  EXPECT_FALSE(e.has_unfinished());
}

// An async pooling request aborted while its first chunk is in flight: dropped from the pooling of
// that step, never output; the others equal the synchronous engine's; every block back.
TEST(Pooling, AsyncStepsDropAnAbortedRequest) {
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(100, 31), random_tokens(30, 32),
                                                     random_tokens(70, 33)};
  EngineConfig cfg = pooling_cfg(PoolingType::Mean, true);
  cfg.max_num_batched_tokens = 48;
  cfg.max_num_seqs = 4;
  cfg.block_size = 16;
  LLMEngine sync(cfg);
  const auto want = run_all(sync, prompts, embed());
  cfg.async_scheduling = true;
  LLMEngine e(cfg);
  std::vector<int64_t> ids;
  for (auto& p : prompts) ids.push_back(e.add_request(p, embed()));
  EXPECT_TRUE(e.step().finished.empty());  // the first 48 tokens of prompt 0, in flight
  EXPECT_TRUE(e.abort(ids[0]));
  std::map<int64_t, std::vector<float>> got;
  while (e.has_unfinished())
    for (auto& f : e.step().finished) got[f.request_id] = f.pooled;
  EXPECT_EQ(got.count(ids[0]), 0u);
  ASSERT_EQ(got.size(), 2u);
  expect_close(got[ids[1]], want[1], 1e-5f);  // other batches than the synchronous run's (prompt 0 gone)
  expect_close(got[ids[2]], want[2], 1e-5f);
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
}

TEST(Pooling, NormalizeAndMatryoshkaDimensions) {
  test::TempDir d;
  copy_fixture(d, {{"matryoshka_dimensions", {32, 64}}});
  LLMEngine raw(pooling_cfg(PoolingType::Last, false, d.dir.string()));
  LLMEngine unit(pooling_cfg(PoolingType::Last, true, d.dir.string()));
  const auto prompt = random_tokens(30, 6);
  const auto r = run_all(raw, {prompt}, embed())[0];
  ASSERT_EQ(int64_t(r.size()), raw.model_config().hidden_size);
  for (int64_t dims : {int64_t(32), int64_t(96)}) {
    const auto u = run_all(unit, {prompt}, dims == 96 ? embed() : embed(dims))[0];
    ASSERT_EQ(int64_t(u.size()), dims);
    double ss = 0;
    for (int64_t k = 0; k < dims; ++k) ss += double(r[size_t(k)]) * r[size_t(k)];
    for (int64_t k = 0; k < dims; ++k) EXPECT_NEAR(u[size_t(k)], r[size_t(k)] / std::sqrt(ss), 1e-6);
  }
  try {
    unit.add_request(prompt, embed(48));
    FAIL() << "48 is not among the model's dimensions";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param, "dimensions");
    EXPECT_NE(std::string(e.what()).find("only supports [32, 64] matryoshka dimensions"), std::string::npos);
  }
  LLMEngine plain(pooling_cfg(PoolingType::Last, true));
  try {
    plain.add_request(prompt, embed(32));
    FAIL() << "the fixture declares no Matryoshka dimensions";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("does not support matryoshka representation"), std::string::npos);
  }
}

// Qwen3-Reranker as vLLM converts it: the score is sigmoid(logit(yes) - logit(no)) of the last
// prompt token, which the generate engine's logits give directly.
TEST(Pooling, ClassifierFromTokenEqualsTheYesNoLogits) {
  const int32_t no = 11, yes = 42;
  EngineConfig cfg = tiny_cfg();
  cfg.runner = RunnerChoice::Pooling;
  cfg.hf_overrides = HfOverrides::parse(R"({"architectures": ["Qwen3ForSequenceClassification"],
      "classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": true})",
                                        "--hf-overrides");
  cfg.classifier_token_ids = {no, yes};
  LLMEngine reranker(cfg);
  ASSERT_TRUE(reranker.pooling_model() && reranker.pooling_model()->classify);
  LLMEngine gen(tiny_cfg());
  std::vector<float> last_logits;
  gen.model_runner().logits_observer = [&](const ScheduledBatch&, const std::vector<float>& l) {
    if (last_logits.empty()) last_logits = l;
  };
  const auto prompt = random_tokens(60, 7);
  gen.add_request(prompt, test::greedy(1));
  while (gen.has_unfinished()) gen.step();
  SamplingParams sp;
  sp.pooling = PoolingParams{PoolingTask::Score};
  const auto score = run_all(reranker, {prompt}, sp)[0];
  ASSERT_EQ(score.size(), 1u);
  const double want = 1.0 / (1.0 + std::exp(-(double(last_logits[yes]) - last_logits[no])));
  EXPECT_NEAR(score[0], want, 1e-5);
  SamplingParams raw = sp;
  raw.pooling->activation = false;
  EXPECT_NEAR(run_all(reranker, {prompt}, raw)[0][0], last_logits[yes] - last_logits[no], 1e-4);
  EXPECT_THROW(reranker.add_request(prompt, embed()), InvalidRequest);  // a classifier makes no embeddings
}

TEST(Pooling, SentenceTransformersLayoutIsDetected) {
  test::TempDir d;
  copy_fixture(
      d, nlohmann::json::object(),
      {{"modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
      {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])"},
       {"1_Pooling/config.json", R"({"word_embedding_dimension": 96, "pooling_mode_cls_token": false,
      "pooling_mode_mean_tokens": true, "pooling_mode_lasttoken": false, "include_prompt": true})"}});
  LLMEngine e(tiny_cfg(d.dir.string()));  // --runner auto
  ASSERT_TRUE(e.pooling_model());
  EXPECT_EQ(e.pooling_model()->type, PoolingType::Mean);
  EXPECT_TRUE(e.pooling_model()->normalize);
  EXPECT_FALSE(e.config().enable_prefix_caching);
  const auto v = run_all(e, {random_tokens(20, 8)}, embed())[0];
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  EXPECT_NEAR(ss, 1.0, 1e-5);
  // A module we do not implement is refused by name.
  std::ofstream(d.path("modules.json"))
      << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])";
  try {
    LLMEngine bad(tiny_cfg(d.dir.string()));
    FAIL() << "Dense is not implemented";
  } catch (const LoadError& err) {
    EXPECT_NE(std::string(err.what()).find("sentence_transformers.models.Dense"), std::string::npos);
  }
}

TEST(Pooling, GenerateAndPoolingRequestsGoToTheirOwnRunners) {
  LLMEngine pooling(pooling_cfg(PoolingType::Last, true));
  EXPECT_THROW(pooling.add_request(random_tokens(5, 9), test::greedy(3)), InvalidRequest);
  LLMEngine gen(tiny_cfg());
  EXPECT_FALSE(gen.pooling_model());
  EXPECT_THROW(gen.add_request(random_tokens(5, 9), embed()), InvalidRequest);
  // A prompt as long as max_model_len is fine for pooling (nothing is generated after it).
  EngineConfig cfg = pooling_cfg(PoolingType::Last, true);
  cfg.max_model_len = 64;
  LLMEngine bounded(cfg);
  EXPECT_EQ(run_all(bounded, {random_tokens(64, 10)}, embed())[0].size(), 96u);
  EXPECT_THROW(bounded.add_request(random_tokens(65, 10), embed()), InvalidRequest);
}

TEST(Pooling, SettingsSpellings) {
  EXPECT_EQ(parse_task("embedding").runner, RunnerChoice::Pooling);
  EXPECT_EQ(parse_task("score").convert, ConvertChoice::Classify);
  EXPECT_THROW(parse_task("reward"), UserError);
  EXPECT_THROW(parse_runner_choice("draft"), UserError);
  EXPECT_THROW(PoolerConfig::parse(R"({"pooling_type": "MAX"})", "--pooler-config"), UserError);
  EXPECT_THROW(PoolerConfig::parse(R"({"dimensions": 3})", "--pooler-config"), UserError);
  EXPECT_THROW(HfOverrides::parse(R"({"rope_theta": 3})", "--hf-overrides"), UserError);
  EXPECT_EQ(HfOverrides::parse(R"({"is_original_qwen3_reranker": true})", "x").classifier_from_token,
            (std::vector<std::string>{"no", "yes"}));
  EXPECT_EQ(PoolerConfig::parse(R"({"pooling_type": "mean", "normalize": false})", "x").to_json(),
            R"({"pooling_type":"MEAN","normalize":false})");
}
