// generation_config.json as vLLM applies it: the sampling keys become request defaults (max_new_tokens
// caps max_tokens), `vllm` ignores the file, a directory is read instead, the override merges on top,
// and bad files or values are errors naming them.
#include <gtest/gtest.h>

#include "nanovllm/config/generation_defaults.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"

using namespace nanovllm;

TEST(GenerationDefaults, Qwen3FileBecomesDefaults) {
  test::TempDir t;
  t.write("generation_config.json",
          R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95})");
  const GenerationDefaults d = load_generation_defaults("auto", t.dir.string(), "");
  EXPECT_EQ(d.as_json().dump(), R"({"temperature":0.6,"top_k":20,"top_p":0.95})");
  const SamplingParams sp = d.params();
  EXPECT_FLOAT_EQ(sp.temperature, 0.6f);
  EXPECT_EQ(sp.top_k, 20);
  EXPECT_FLOAT_EQ(sp.top_p, 0.95f);
  EXPECT_FLOAT_EQ(sp.min_p, SamplingParams{}.min_p);  // absent keys keep vLLM's defaults
  EXPECT_EQ(d.default_max_tokens(1000), 1000);        // no max_new_tokens: what the context leaves
}

TEST(GenerationDefaults, ModesAndOverride) {
  test::TempDir model("gd_model_"), other("gd_other_");
  model.write("generation_config.json", R"({"temperature": 0.0, "max_new_tokens": 7, "min_p": 0.1})");
  other.write("generation_config.json", R"({"top_p": 0.5})");
  EXPECT_TRUE(load_generation_defaults("vllm", model.dir.string(), "").empty());
  EXPECT_EQ(load_generation_defaults("auto", model.dir.string(), "").default_max_tokens(100), 7);
  EXPECT_EQ(load_generation_defaults("auto", model.dir.string(), "").default_max_tokens(3), 3);
  EXPECT_EQ(load_generation_defaults(other.dir.string(), model.dir.string(), "").as_json().dump(), R"({"top_p":0.5})");
  const auto merged = load_generation_defaults("auto", model.dir.string(), R"({"temperature": 0.3, "top_k": 5})");
  EXPECT_EQ(merged.as_json().dump(), R"({"max_tokens":7,"min_p":0.1,"temperature":0.3,"top_k":5})");
  EXPECT_EQ(load_generation_defaults("vllm", model.dir.string(), R"({"max_new_tokens": 3})").as_json().dump(),
            R"({"max_tokens":3})");
  test::TempDir none("gd_none_");  // auto without a file: nothing
  EXPECT_TRUE(load_generation_defaults("auto", none.dir.string(), "").empty());
}

TEST(GenerationDefaults, ErrorsNameTheSource) {
  test::TempDir t;
  auto message = [&](const std::string& mode, const std::string& over) {
    try {
      load_generation_defaults(mode, t.dir.string(), over);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(t.dir.string(), "").find("no generation_config.json there"), std::string::npos);
  EXPECT_NE(message(t.path("nope"), "").find("not auto, vllm or a directory"), std::string::npos);
  EXPECT_NE(message("vllm", "[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(message("vllm", R"({"top_p": 2})").find("top_p must be in (0, 1]"), std::string::npos);
  EXPECT_NE(message("vllm", R"({"top_k": "20"})").find("'top_k' must be an integer"), std::string::npos);
  EXPECT_NE(message("vllm", R"({"max_new_tokens": 0})").find("max_new_tokens must be at least 1"), std::string::npos);
  t.write("generation_config.json", "{not json");
  const std::string bad = message("auto", "");
  EXPECT_NE(bad.find("generation_config.json: not valid JSON"), std::string::npos) << bad;
}
