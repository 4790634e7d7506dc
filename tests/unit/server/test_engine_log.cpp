// The engine thread's log lines and the new metrics: the stats line only when due and with work to
// report, its throughputs over the interval; request lines; metrics known from start-up.
#include <gtest/gtest.h>

#include "nanovllm/server/engine_log.h"

using namespace nanovllm;
using namespace nanovllm::server;

TEST(EngineLog, StatsLineWhenDueAndBusy) {
  StatsLog s(10);
  const auto t0 = StatsLog::Clock::now();
  EngineGauges g;
  g.kv_blocks_total = 200;
  g.kv_blocks_used = 3;
  g.running = 2;
  g.waiting = 1;
  g.prefix_queries = 100;
  g.prefix_hits = 25;
  s.on_step(1000, 40);
  EXPECT_EQ(s.maybe_line(t0 + std::chrono::seconds(5), g), "");  // not due
  EXPECT_EQ(s.maybe_line(t0 + std::chrono::milliseconds(10050), g).substr(0, 11), "Engine 000:");
  s.on_step(0, 20);
  g.prefix_queries = 200;  // 100 more looked up, 75 more found
  g.prefix_hits = 100;
  const std::string line = s.maybe_line(t0 + std::chrono::milliseconds(20050), g);
  EXPECT_EQ(line,
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 2 "
            "reqs, Waiting: 1 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 75.0%");
  EngineGauges idle;
  EXPECT_FALSE(s.pending(idle));
  EXPECT_EQ(s.maybe_line(t0 + std::chrono::seconds(40), idle), "");  // nothing to report
}

TEST(EngineLog, RequestLines) {
  SamplingParams sp;
  sp.temperature = 0.5f;
  sp.max_tokens = 9;
  sp.stop = {"\n"};
  const std::string got = request_received_line("cmpl-1-2", 12, sp);
  EXPECT_NE(got.find("Received request cmpl-1-2: prompt tokens 12, params: {"), std::string::npos) << got;
  EXPECT_NE(got.find("\"max_tokens\":9"), std::string::npos) << got;
  EXPECT_NE(got.find("\"stop\":[\"\\n\"]"), std::string::npos) << got;
  FinishedRequest r{FinishReason::Length, 12, 9, 1.5, 0.25, 0.125, 1.0};
  EXPECT_EQ(request_finished_line("cmpl-1-2", r),
            "Finished request cmpl-1-2: finish_reason length, prompt tokens 12, generation tokens 9, queue 0.250 s, "
            "prefill 0.125 s, decode 1.000 s, e2e 1.500 s");
}

// A client cannot forge log lines (a newline in its request id) or flood them (huge ids, many or
// long stop strings): control characters are escaped, strings cut, stop strings counted.
TEST(EngineLog, ClientStringsCannotForgeOrFloodLines) {
  SamplingParams sp;
  sp.stop = std::vector<std::string>(1000, std::string(5000, 's'));
  const std::string id = "req\nINFO Finished request x" + std::string(100000, 'i');
  const std::string got = request_received_line(id, 3, sp);
  EXPECT_EQ(got.find('\n'), std::string::npos);
  EXPECT_NE(got.find("req\\x0aINFO"), std::string::npos) << got.substr(0, 80);
  EXPECT_LT(got.size(), 5000u);
  EXPECT_NE(got.find("\"stop_count\":1000"), std::string::npos);
  EXPECT_NE(got.find("(100027 bytes)"), std::string::npos);
  FinishedRequest r{FinishReason::Stop, 1, 1, 0, 0, 0, 0};
  const std::string fin = request_finished_line(id, r);
  EXPECT_EQ(fin.find('\n'), std::string::npos);
  EXPECT_LT(fin.size(), 600u);
}

TEST(EngineLog, MetricsFromStartUp) {
  CacheInfo c;
  c.block_size = 256;
  c.num_blocks = 73;
  c.gpu_memory_utilization = 0.9;
  Metrics m("m", c);
  const std::string text = m.render();
  EXPECT_NE(text.find("nanovllm:kv_cache_blocks_total{model_name=\"m\"} 73\n"), std::string::npos);
  EXPECT_NE(text.find("vllm:cache_config_info{model_name=\"m\",block_size=\"256\",cache_dtype=\"auto\","
                      "enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"73\"} 1\n"),
            std::string::npos)
      << text;
  m.on_request_finished({FinishReason::Stop, 30, 4, 2.0, 0.1, 0.4, 1.5});
  m.on_iteration(30);
  const std::string after = m.render();
  for (const char* s : {"vllm:request_prompt_tokens_bucket{model_name=\"m\",le=\"50\"} 1\n",
                        "vllm:request_prompt_tokens_bucket{model_name=\"m\",le=\"20\"} 0\n",
                        "vllm:request_generation_tokens_sum{model_name=\"m\"} 4\n",
                        "vllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.1\n",
                        "vllm:request_prefill_time_seconds_sum{model_name=\"m\"} 0.4\n",
                        "vllm:request_decode_time_seconds_bucket{model_name=\"m\",le=\"1.5\"} 1\n",
                        "vllm:iteration_tokens_total_bucket{model_name=\"m\",le=\"32\"} 1\n",
                        "vllm:iteration_tokens_total_bucket{model_name=\"m\",le=\"16\"} 0\n"})
    EXPECT_NE(after.find(s), std::string::npos) << s;
}

TEST(EngineLog, SpeculativeDecodingCounters) {
  Metrics m("m", CacheInfo{});
  EngineGauges g;
  m.set_gauges(g);
  EXPECT_EQ(m.render().find("spec_decode"), std::string::npos) << "not shown without speculative decoding";
  g.speculative = true;
  g.spec_drafts = 5;
  g.spec_draft_tokens = 15;
  g.spec_accepted_tokens = 9;
  g.spec_accepted_per_pos = {5, 3, 1};
  m.set_gauges(g);
  const std::string text = m.render();
  for (const char* s : {"vllm:spec_decode_num_drafts_total{model_name=\"m\"} 5\n",
                        "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 15\n",
                        "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 9\n",
                        "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"2\"} 1\n"})
    EXPECT_NE(text.find(s), std::string::npos) << s << text;
  StatsLog s(10);
  const auto t0 = StatsLog::Clock::now();
  g.running = 1;
  const std::string line = s.maybe_line(t0 + std::chrono::seconds(11), g);
  EXPECT_NE(line.find("Spec decode draft acceptance rate: 60.0%, Drafted: 15 tokens, Accepted: 9 tokens"),
            std::string::npos)
      << line;
}
