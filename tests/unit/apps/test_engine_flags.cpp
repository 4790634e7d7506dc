// The CLI's engine flags (apps/nanovllm/engine_flags.cpp) are the settings table's: every CLI
// spelling of every setting parses into its field, --help shows each, and vLLM's -tp works.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_flags.h"
#include "nanovllm/utils/error.h"
#include "settings_samples.h"
#include "vllm_flags.h"

using namespace nanovllm;

namespace {

// Parses `generate`-style arguments (MODEL first) into a resolved config.
EngineConfig parse(std::vector<std::string> args) {
  CLI::App app;
  cli::take_last_repeated_values(app);
  cli::EngineFlags flags;
  flags.add_to(app);
  args.insert(args.begin(), "qwen3-0.6b");
  args = cli::expand_vllm_aliases(args);
  std::reverse(args.begin(), args.end());  // CLI11's order
  app.parse(args);
  return flags.resolve();
}

// Settings that are valid only with others (tensor parallelism across nodes).
std::vector<std::string> companions(const std::string& name) {
  if (name == "nnodes") return {"--tensor-parallel-size", "2"};
  if (name == "node_rank") return {"--tensor-parallel-size", "2", "--nnodes", "2"};
  if (name == "max_long_partial_prefills") return {"--max-num-partial-prefills", "8"};
  return {};
}

TEST(EngineFlags, EverySpellingOfEverySettingParsesIntoItsField) {
  for (const Setting& s : engine_settings()) {
    const bool flag_only = s.type == SettingType::Bool || s.type == SettingType::OptionalBool;
    const std::string text = flag_only ? "true" : test::other_value_text(s);  // a flag turns it on
    EngineConfig want;
    set_setting_text(s, want, text);
    for (const std::string& flag : s.flags) {
      std::vector<std::string> args = companions(s.name);
      args.push_back(flag);
      if (!flag_only) args.push_back(text);
      EngineConfig got;
      ASSERT_NO_THROW(got = parse(args)) << flag << " " << text;
      EXPECT_EQ(setting_text(s.get(got)), setting_text(s.get(want))) << flag << " " << text;
    }
    if (!s.off_flag.empty()) {
      EXPECT_EQ(setting_text(s.get(parse({s.off_flag}))), "false") << s.off_flag;
      EXPECT_THROW(parse({s.flags.front(), s.off_flag}), UserError) << s.off_flag;
    }
  }
}

TEST(EngineFlags, HelpShowsEverySetting) {
  CLI::App app;
  cli::EngineFlags flags;
  flags.add_to(app);
  const std::string help = app.help();
  for (const Setting& s : engine_settings()) {
    for (const std::string& flag : s.flags)
      if (flag.rfind("--", 0) == 0) EXPECT_NE(help.find(flag), std::string::npos) << flag;
    if (!s.flags.empty()) EXPECT_NE(help.find(s.help.substr(0, 30)), std::string::npos) << s.name;
  }
}

TEST(EngineFlags, UnsetFlagsKeepTheDefaults) {
  const EngineConfig got = parse({});
  const EngineConfig defaults;
  for (const Setting& s : engine_settings())
    if (s.name != "kernel_options")  // NANOVLLM_* of the environment may apply
      EXPECT_EQ(setting_text(s.get(got)), setting_text(s.get(defaults))) << s.name;
}

TEST(EngineFlags, SchedulingPolicyTakesPriority) {
  EXPECT_EQ(parse({"--scheduling-policy", "priority"}).scheduling_policy, SchedulingPolicy::Priority);
  try {
    parse({"--scheduling-policy", "lifo"});
    ADD_FAILURE() << "lifo accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--scheduling-policy must be fcfs or priority"), std::string::npos);
  }
}

}  // namespace

// argparse's rules, as vLLM's command lines expect: a repeated flag's last value wins, sizes take
// human_readable_int's suffixes, vLLM's harmless engine flags are accepted.
TEST(EngineFlags, RepeatedFlagsTakeTheLastValueAndSizesTakeSuffixes) {
  EngineConfig c = parse({"--max-num-seqs", "3", "--max-num-seqs", "7", "--max-model-len", "32k"});
  EXPECT_EQ(c.max_num_seqs, 7);
  EXPECT_EQ(c.max_model_len, 32000);
  EXPECT_EQ(parse({"--max-model-len", "2K", "--max-num-batched-tokens", "8K"}).max_num_batched_tokens, 8192);
  EXPECT_EQ(parse({"--enforce-eager", "--enforce-eager"}).enforce_eager, true);
  EXPECT_NO_THROW(parse({"--swap-space", "4", "-O", "3", "--compilation-config", "{\"level\": 3}"}));
  EXPECT_THROW(parse({"--max-num-seqs", "1k"}), UserError);  // suffixes only where vLLM takes them
}
