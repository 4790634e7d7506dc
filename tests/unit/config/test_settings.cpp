// The engine settings table (config/settings.h): every entry reads and writes its field, parses
// its CLI text, has unique spellings, and the README's settings table is its output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "nanovllm/config/settings.h"
#include "nanovllm/utils/error.h"
#include "settings_samples.h"

using namespace nanovllm;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Settings, EveryEntryRoundTripsThroughItsText) {
  for (const Setting& s : engine_settings()) {
    EngineConfig cfg;
    const std::string text = test::other_value_text(s);
    set_setting_text(s, cfg, text);
    EngineConfig again;
    set_setting_text(s, again, setting_text(s.get(cfg)));  // what --help, the README and the wire show
    EXPECT_EQ(s.get(again), s.get(cfg)) << s.name;
    if (s.name != "scheduling_policy") EXPECT_NE(s.get(cfg), s.get(EngineConfig{})) << s.name << " = " << text;
    // valid only with other settings (tensor parallelism; at most --max-num-partial-prefills)
    if (s.name != "nnodes" && s.name != "node_rank" && s.name != "max_long_partial_prefills")
      EXPECT_NO_THROW(cfg.validate()) << s.name << " = " << text;
  }
}

TEST(Settings, NamesSpellingsAndKeywordsAreUnique) {
  std::set<std::string> names, flags, keywords;
  for (const Setting& s : engine_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    for (const auto& f : s.flags) EXPECT_TRUE(flags.insert(f).second) << f;
    if (!s.off_flag.empty()) EXPECT_TRUE(flags.insert(s.off_flag).second) << s.off_flag;
    for (const auto& k : s.keywords) EXPECT_TRUE(keywords.insert(k).second) << k;
    EXPECT_FALSE(s.help.empty()) << s.name;
    if (s.type == SettingType::Choice) EXPECT_FALSE(s.choices.empty()) << s.name;
    for (const auto& c : s.choices) {
      EngineConfig cfg;
      EXPECT_NO_THROW(set_setting_text(s, cfg, c)) << s.name << " = " << c;
    }
  }
}

TEST(Settings, BadValuesAreRefusedNamingTheFlag) {
  EngineConfig cfg;
  EXPECT_EQ(error_of([&] { set_setting_text(find_setting("max_num_seqs"), cfg, "12x"); }),
            "--max-num-seqs must be an integer (got '12x')");
  EXPECT_EQ(error_of([&] { set_setting_text(find_setting("device"), cfg, "tpu"); }),
            "--device must be cpu, cuda or auto (got 'tpu')");
  EXPECT_EQ(error_of([&] { set_setting_text(find_setting("seed"), cfg, "-1"); }), "--seed must be >= 0 (got -1)");
  EXPECT_EQ(error_of([&] { set_setting_text(find_setting("tensor_parallel_size"), cfg, "9999999999"); }),
            "--tensor-parallel-size 9999999999 is out of range");
  EXPECT_NE(error_of([&] {
              set_setting_text(find_setting("logprobs_mode"), cfg, "raw_logits");
            }).find("--logprobs-mode 'raw_logits' is not implemented"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { find_setting("enforce_eager").set(cfg, int64_t(1)); }),
            "--enforce-eager must be a bool (got '1')");
  EXPECT_EQ(error_of([&] { find_setting("num_kvcache_blocks").set(cfg, std::string("x")); }),
            "--num-kvcache-blocks must be an int (got 'x')");
}

// vLLM's human_readable_int: k m g t are powers of 10 (decimals allowed), K M G T powers of 2.
TEST(Settings, SizeSuffixesAsVllm) {
  EXPECT_EQ(parse_size_suffixed("32k"), 32000);
  EXPECT_EQ(parse_size_suffixed("32K"), 32768);
  EXPECT_EQ(parse_size_suffixed("25.6k"), 25600);
  EXPECT_EQ(parse_size_suffixed("1M"), int64_t(1) << 20);
  EXPECT_EQ(parse_size_suffixed("2g"), int64_t(2000000000));
  EXPECT_EQ(parse_size_suffixed("1T"), int64_t(1) << 40);
  for (const char* bad : {"1.5K", "k", "12", "1x", "-1k", "1.k", ".5k", "99999999999T"})
    EXPECT_EQ(parse_size_suffixed(bad), std::nullopt) << bad;
  EngineConfig cfg;
  set_setting_text(find_setting("max_model_len"), cfg, "4k");
  EXPECT_EQ(cfg.max_model_len, 4000);
  set_setting_text(find_setting("kv_cache_memory"), cfg, "512M");
  EXPECT_EQ(cfg.kv_cache_memory, int64_t(512) << 20);
  EXPECT_NE(error_of([&] { set_setting_text(find_setting("max_model_len"), cfg, "1.5K"); }).find("K/M/G/T"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { set_setting_text(find_setting("max_num_seqs"), cfg, "1k"); }),
            "--max-num-seqs must be an integer (got '1k')");
}

// vLLM's --scheduling-policy: fcfs or priority.
TEST(Settings, SchedulingPolicyTakesFcfsAndPriority) {
  EngineConfig cfg;
  const Setting& s = find_setting("scheduling_policy");
  EXPECT_NO_THROW(set_setting_text(s, cfg, "priority"));
  EXPECT_EQ(cfg.scheduling_policy, SchedulingPolicy::Priority);
  EXPECT_NO_THROW(set_setting_text(s, cfg, "fcfs"));
  EXPECT_EQ(cfg.scheduling_policy, SchedulingPolicy::Fcfs);
  EXPECT_EQ(error_of([&] { set_setting_text(s, cfg, "lifo"); }),
            "--scheduling-policy must be fcfs or priority (got 'lifo')");
}

TEST(Settings, TargetItlAndPartialPrefills) {
  EngineConfig cfg;
  EXPECT_EQ(cfg.target_itl_ms, -1);  // unset: settled by the front end
  settle_target_itl(cfg, true, true);
  EXPECT_EQ(cfg.target_itl_ms, kServeTargetItlMs);
  EngineConfig offline;
  settle_target_itl(offline, false, true);
  EXPECT_EQ(offline.target_itl_ms, 0);
  EngineConfig cpu;
  settle_target_itl(cpu, true, false);
  EXPECT_EQ(cpu.target_itl_ms, 0);
  EngineConfig given;
  set_setting_text(find_setting("target_itl_ms"), given, "25");
  settle_target_itl(given, true, true);
  EXPECT_EQ(given.target_itl_ms, 25);
  EXPECT_NE(error_of([&] {
              set_setting_text(find_setting("target_itl_ms"), given, "-3");
              given.validate();
            }).find("--target-itl-ms must be >= 0"),
            std::string::npos);
  EngineConfig p;
  set_setting_text(find_setting("max_num_partial_prefills"), p, "2");
  set_setting_text(find_setting("max_long_partial_prefills"), p, "3");
  EXPECT_NE(error_of([&] { p.validate(); }).find("--max-long-partial-prefills (3) must be at most"), std::string::npos);
  set_setting_text(find_setting("long_prefill_token_threshold"), p, "4k");
  EXPECT_EQ(p.long_prefill_token_threshold, 4000);
}

// cpu_precision left the kernel options for a setting of its own; --kernel-options still takes it.
TEST(Settings, KernelOptionsStillTakeCpuPrecision) {
  EngineConfig cfg;
  const Setting& k = find_setting("kernel_options");
  set_setting_text(k, cfg, "pdl=off,cpu_precision=exact,decode_warps=4");
  EXPECT_EQ(cfg.cpu_precision, CpuPrecision::Exact);
  EXPECT_FALSE(cfg.kernels.pdl);
  EXPECT_EQ(cfg.kernels.decode_warps, 4);
  EXPECT_EQ(error_of([&] { set_setting_text(k, cfg, "cpu_precision=bf16"); }),
            "--kernel-options: cpu_precision must be fast or exact (got 'bf16')");
  set_setting_text(k, cfg, "");  // nothing given: nothing changes
  EXPECT_FALSE(cfg.kernels.pdl);
}

TEST(Settings, NumKvcacheBlocksTakesNanoVllmsMinusOne) {
  EngineConfig cfg;
  find_setting("num_kvcache_blocks").set(cfg, int64_t(-1));
  EXPECT_EQ(cfg.num_kvcache_blocks, 0);
}

// The README's settings table is `nanovllm settings --markdown`, between its two markers.
TEST(Settings, ReadmeTableIsTheTable) {
  const char* src = std::getenv("NANOVLLM_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "NANOVLLM_SOURCE_DIR (set by ctest)";
  std::ifstream in(std::string(src) + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const std::string begin = "<!-- settings table: generated by `nanovllm settings --markdown` -->\n";
  const std::string end = "<!-- end of settings table -->";
  const size_t b = readme.find(begin), e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md lacks " << begin;
  ASSERT_NE(e, std::string::npos) << "README.md lacks " << end;
  EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), settings_markdown())
      << "README.md's settings table is stale: replace it with the output of `build/nanovllm settings --markdown`";
}

}  // namespace
