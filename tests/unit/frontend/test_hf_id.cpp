// The LLM front end given a Hugging Face id: the tiny Qwen3 fixture (sharded) and the Qwen3 tokenizer laid
// out as a hub cache (hf_cache_writer.h) load by id (and by --tokenizer id), generate exactly what
// the directory does, and keep the id as the model's name; a directory that does not exist is
// reported as such, not as a missing tokenizer.json.
#include <gtest/gtest.h>

#include <cstdlib>

#include "hf_cache_writer.h"
#include "nanovllm/config/hf_hub.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::commit_hash;
using test::HfCacheWriter;

namespace {

// The sharded fixture: the index and its shards are links into blobs/ too.
const std::vector<std::string> kModelFiles = {"config.json", "generation_config.json", "model.safetensors.index.json",
                                              "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
const std::vector<std::string> kTokenizerFiles = {"tokenizer.json", "tokenizer_config.json"};

std::vector<int32_t> generated(LLM& llm) {
  auto outs = llm.generate({Prompt::of_ids(test::random_tokens(12, 7))}, {test::greedy(6)});
  return outs.at(0).token_ids;
}

TEST(HfId, AnIdInTheCacheLoadsAndGeneratesAsItsDirectory) {
  test::TempDir t;
  HfCacheWriter model(t.dir / "hub", "tiny-org/tiny-qwen3");
  model.snapshot_of_dir(commit_hash('a'), test::fixture("tiny-qwen3-untied"), kModelFiles);
  model.snapshot_of_dir(commit_hash('a'), test::qwen3_tokenizer_dir(), kTokenizerFiles);
  model.ref("main", commit_hash('a'));

  EngineConfig by_dir = test::tiny_cfg();
  LLM direct(by_dir, test::qwen3_tokenizer_dir());

  EngineConfig by_id = test::tiny_cfg("tiny-org/tiny-qwen3");
  by_id.download_dir = (t.dir / "hub").string();
  LLM cached(by_id);
  EXPECT_EQ(cached.config().model, "tiny-org/tiny-qwen3");  // the name shown (served model name)
  EXPECT_EQ(cached.config().model_path(), model.snapshot_dir(commit_hash('a')).string());
  ASSERT_NE(cached.tokenizer(), nullptr);  // the snapshot's tokenizer.json
  EXPECT_EQ(cached.tokenizer()->encode("Hello world", false), direct.tokenizer()->encode("Hello world", false));
  EXPECT_EQ(generated(cached), generated(direct));
}

TEST(HfId, TheTokenizerResolvesByIdAndRevisionToo) {
  test::TempDir t;
  HfCacheWriter tok(t.dir / "hub", "tok-org/qwen3-tokenizer");
  tok.snapshot_of_dir(commit_hash('b'), test::qwen3_tokenizer_dir(), kTokenizerFiles);
  tok.ref("v1", commit_hash('b'));
  EngineConfig cfg = test::tiny_cfg();
  cfg.download_dir = (t.dir / "hub").string();
  cfg.tokenizer_revision = "v1";
  EXPECT_EQ(find_tokenizer_dir(cfg, "tok-org/qwen3-tokenizer"), tok.snapshot_dir(commit_hash('b')).string());
  cfg.tokenizer_revision = "";
  cfg.revision = "main";  // the tokenizer follows the model's revision: main is not cached
  try {
    find_tokenizer_dir(cfg, "tok-org/qwen3-tokenizer");
    ADD_FAILURE() << "resolved an uncached revision";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer 'tok-org/qwen3-tokenizer': no such directory"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("but not at revision main"), std::string::npos) << e.what();
  }
}

TEST(HfId, AMissingDirectoryIsReportedAsSuch) {
  test::TempDir t;
  EngineConfig cfg = test::tiny_cfg(t.path("no-such-model"));
  try {
    LLM llm(cfg);
    ADD_FAILURE() << "loaded a model that does not exist";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "model directory '" + t.path("no-such-model") + "' does not exist");
  }
}

}  // namespace
