// --speculative-config: vLLM's JSON for the n-gram method, its defaults, and refusals by name.
#include <gtest/gtest.h>

#include "nanovllm/config/settings.h"
#include "nanovllm/config/speculative_config.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

std::string error_of(const std::string& json) {
  try {
    SpeculativeConfig::parse(json, "--speculative-config");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SpeculativeConfig, NgramAndDefaults) {
  auto c = SpeculativeConfig::parse(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 2})", "f");
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2})", "f");
  EXPECT_EQ(c.prompt_lookup_min, 5);  // vLLM's defaults
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4})", "f");
  EXPECT_EQ(c.prompt_lookup_min, 4);
  EXPECT_EQ(SpeculativeConfig::parse(c.to_json(), "f").to_json(), c.to_json());
  EXPECT_FALSE(SpeculativeConfig::parse("", "f").enabled());
  EXPECT_FALSE(SpeculativeConfig::parse("{}", "f").enabled());
  EXPECT_EQ(SpeculativeConfig{}.to_json(), "");
}

TEST(SpeculativeConfig, RefusalsNameTheProblem) {
  EXPECT_NE(error_of(R"({"method": "eagle", "num_speculative_tokens": 2})").find("'eagle' is not implemented yet"),
            std::string::npos);
  // eagle3 parses (the engine resolves its head, or a dummy one) and keeps its model.
  const SpeculativeConfig e3 =
      SpeculativeConfig::parse(R"({"method": "eagle3", "model": "/h", "num_speculative_tokens": 3})", "f");
  EXPECT_EQ(e3.method, "eagle3");
  EXPECT_EQ(SpeculativeConfig::parse(e3.to_json(), "f").to_json(), e3.to_json());
  EXPECT_NE(error_of(R"({"method": "draft_model", "num_speculative_tokens": 2})").find("needs 'model'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "model": "/x", "num_speculative_tokens": 2})").find("takes no 'model'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": "/x", "num_speculative_tokens": 2, "prompt_lookup_max": 3})")
                .find("belong to method 'ngram'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": 3, "num_speculative_tokens": 2})").find("'model' must be a non-empty string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 1})")
                .find("'disable_by_batch_size' must be at least 2"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "foo": 1})").find("unknown key 'foo'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram"})").find("'num_speculative_tokens' is required"), std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 0})").find("[1, 64]"), std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
                         "prompt_lookup_max": 3})")
                .find("must not exceed"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "nope", "num_speculative_tokens": 2})").find("unknown method 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of("{bad").find("JSON object"), std::string::npos);
}

TEST(SpeculativeConfig, DraftModelAndDisableByBatchSize) {
  // vLLM: "model" without a method means a draft model.
  auto c = SpeculativeConfig::parse(R"({"model": "/d", "num_speculative_tokens": 3, "disable_by_batch_size": 8})", "f");
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.method, "draft_model");
  EXPECT_EQ(c.model, "/d");
  EXPECT_EQ(c.disable_by_batch_size, 8);
  EXPECT_EQ(c.prompt_lookup_min, 0) << "n-gram keys stay unset for a draft model";
  EXPECT_EQ(SpeculativeConfig::parse(c.to_json(), "f").to_json(), c.to_json());
  EXPECT_EQ(c.to_json().find("prompt_lookup"), std::string::npos);
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2})", "f");
  EXPECT_EQ(c.disable_by_batch_size, 0);
  EXPECT_EQ(c.to_json().find("disable_by_batch_size"), std::string::npos);
}

TEST(SpeculativeConfig, Backoff) {
  auto c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2})", "f");
  EXPECT_TRUE(c.backoff) << "on by default";
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2, "backoff": false})", "f");
  EXPECT_FALSE(c.backoff);
  EXPECT_FALSE(SpeculativeConfig::parse(c.to_json(), "f").backoff) << "round trip (the TP wire, Python)";
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "backoff": 1})").find("'backoff' must be"),
            std::string::npos);
}

TEST(SpeculativeConfig, DraftTensorParallelSizeIsOneOnly) {
  // vLLM's key: our drafter runs un-sharded on rank 0 under tensor parallelism.
  const auto c =
      SpeculativeConfig::parse(R"({"model": "/d", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})", "f");
  EXPECT_EQ(c.method, "draft_model");
  EXPECT_EQ(SpeculativeConfig::parse(c.to_json(), "f").to_json(), c.to_json());
  const std::string e =
      error_of(R"({"method": "eagle3", "model": "/h", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2})");
  EXPECT_NE(e.find("'draft_tensor_parallel_size' 2 is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("un-sharded on rank 0"), std::string::npos) << e;
  EXPECT_NE(error_of(R"({"model": "/d", "num_speculative_tokens": 3, "draft_tensor_parallel_size": "1"})")
                .find("must be an integer"),
            std::string::npos);
}

TEST(SpeculativeConfig, IsASetting) {
  EngineConfig c;
  const Setting& s = find_setting("speculative_config");
  EXPECT_EQ(s.flags.at(0), "--speculative-config");
  set_setting_text(s, c, R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.speculative_config.num_speculative_tokens, 3);
  EXPECT_THROW(set_setting_text(s, c, R"({"method": "eagle3"})"), UserError);
}
