// The CUDA sampler's optional passes against the CPU backend: logits processing (penalties,
// logit_bias, min_tokens) and logprobs (log-softmax + top-N, raw and processed), on batches that
// mix rows with and without them, at a real vocabulary (151,936) and an odd one, F32 and BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "gpu_test_util.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/engine/llm_engine.h"
#include "test_paths.h"

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

// Row b's processing: a mix of penalties, biases and bans over a prompt and an output.
LogitsProcessing make_processing(int64_t b, int64_t V, std::mt19937& rng) {
  SamplingParams p;
  p.repetition_penalty = b % 3 == 0 ? 1.0f : 1.4f;
  p.frequency_penalty = b % 2 ? 0.7f : -0.5f;
  p.presence_penalty = b % 4 == 1 ? 1.5f : 0.0f;
  p.logit_bias = {{int32_t(rng() % V), 3.0f}, {int32_t(rng() % V), -100.0f}};
  p.min_tokens = b % 5 == 0 ? 1000 : 0;
  p.stop_token_ids = {int32_t(rng() % V)};
  std::vector<int32_t> prompt(size_t(50 + b * 7)), output(size_t(3 + b * 5));
  for (auto& t : prompt) t = int32_t(rng() % 300);  // repeats, overlapping the output
  for (auto& t : output) t = int32_t(rng() % 300);
  LogitsProcessingBuilder builder(V);
  const std::vector<int32_t> eos{1, 2};
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), output.begin(), output.end());
  return builder.build(p, tokens, int64_t(prompt.size()), eos);
}

}  // namespace

TEST(CudaSampling, ProcessingAndLogprobsMatchTheCpu) {
  REQUIRE_GPU();
  CpuBackend cpu{16};
  CudaBackend gpu(0, KernelOptions{});
  for (int64_t V : {int64_t(151936), int64_t(1003)}) {
    const int64_t B = 17;
    std::mt19937 rng{uint32_t(V)};
    std::normal_distribution<float> nd(0.f, 2.f);
    std::vector<float> logits(size_t(B * V));
    for (auto& x : logits) x = nd(rng);
    std::vector<LogitsProcessing> procs;
    procs.reserve(size_t(B));
    std::vector<SamplingRow> rows;
    for (int64_t b = 0; b < B; ++b) {
      procs.push_back(make_processing(b, V, rng));
      SamplingRow r;
      r.temperature = b % 3 == 2 ? 0.0f : 0.8f;
      r.top_k = b % 4 == 3 ? 40 : 0;
      r.seed = 77 + uint64_t(b);
      r.position = 10 + b;
      if (b % 2 == 0) r.processing = &procs.back();   // odd rows take the plain path
      r.num_logprobs = b % 3 == 1 ? -1 : int(b % 7);  // some rows ask, N from 0 to 6
      r.processed_logprobs = b % 4 == 0;
      rows.push_back(r);
    }
    for (DType dt : {DType::F32, DType::BF16}) {
      std::vector<float> l = logits;
      if (dt == DType::BF16)
        for (auto& x : l) x = bf16_round(x);
      Tensor cl = cpu.empty({B, V}, DType::F32), gl = gpu.empty({B, V}, dt);
      cpu.upload(l.data(), DType::F32, cl);
      gpu.upload(l.data(), DType::F32, gl);
      std::vector<TokenLogprobs> clp, glp;
      const auto want = cpu.sample(cl, rows, &clp);
      const auto got = gpu.sample(gl, rows, &glp);
      int mism = 0;
      for (int64_t b = 0; b < B; ++b) {
        EXPECT_EQ(got[size_t(b)], want[size_t(b)]) << "V " << V << " " << dtype_name(dt) << " row " << b;
        mism += got[size_t(b)] != want[size_t(b)];
        const auto& r = rows[size_t(b)];
        if (r.num_logprobs < 0 || got[size_t(b)] != want[size_t(b)]) continue;
        expect_same_logprobs(glp[size_t(b)], clp[size_t(b)], "row " + std::to_string(b));
      }
      std::printf("[gpu] sampling with processing/logprobs V=%lld %s: %d/%lld rows differ from the CPU\n", (long long)V,
                  dtype_name(dt), mism, (long long)B);
    }
  }
}

// A batch without processing or logprobs gives the same tokens through either entry point.
TEST(CudaSampling, PlainRowsAreUnchanged) {
  REQUIRE_GPU();
  CudaBackend gpu(0, KernelOptions{});
  const int64_t B = 9, V = 5000;
  std::vector<float> l(size_t(B * V));
  std::mt19937 rng(3);
  for (auto& x : l) x = float(rng() % 1000) / 100.f;
  Tensor gl = gpu.empty({B, V}, DType::F32);
  gpu.upload(l.data(), DType::F32, gl);
  std::vector<SamplingRow> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) rows[size_t(b)] = {0.7f, 0, 1.0f, 0.0f, uint64_t(b), 5};
  std::vector<TokenLogprobs> lp;
  const auto a = gpu.sample(gl, rows);
  const auto c = gpu.sample(gl, rows, &lp);
  EXPECT_EQ(a, c);
  ASSERT_EQ(lp.size(), size_t(B));
  for (auto& t : lp) EXPECT_TRUE(t.top.empty());
}

// Prompt logprobs on the GPU (token_logprobs): logprob, rank and top N against the CPU backend.
TEST(CudaSampling, TokenLogprobsMatchTheCpu) {
  REQUIRE_GPU();
  CpuBackend cpu{16};
  CudaBackend gpu(0, KernelOptions{});
  const int64_t B = 13, V = 151936;
  std::mt19937 rng{5};
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> l(static_cast<size_t>(B * V));
  for (auto& x : l) x = bf16_round(nd(rng));
  std::vector<int32_t> tokens;
  for (int64_t b = 0; b < B; ++b) tokens.push_back(int32_t(rng() % V));
  Tensor cl = cpu.empty({B, V}, DType::F32), gl = gpu.empty({B, V}, DType::BF16);
  cpu.upload(l.data(), DType::F32, cl);
  gpu.upload(l.data(), DType::F32, gl);
  const auto want = cpu.token_logprobs(cl, tokens, 4);
  const auto got = gpu.token_logprobs(gl, tokens, 4);
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(got[b].top.size(), 4u);
    expect_same_logprobs(got[b], want[b], std::to_string(b));
  }
}

// The engine on CUDA: logit_bias forces a token in sampled decoding; prompt logprobs through
// chunked prefill agree with the CPU engine within BF16's logit error.
TEST(CudaSampling, EngineBiasAndPromptLogprobs) {
  REQUIRE_GPU();
  EngineConfig cfg;
  cfg.model = fixture("tiny-qwen3-tied");
  cfg.kv_cache_memory = 64 << 20;
  cfg.block_size = 16;
  cfg.max_num_batched_tokens = 64;
  cfg.max_num_seqs = 8;
  EngineConfig ccfg = cfg;
  cfg.device = DeviceChoice::Cuda;
  ccfg.device = DeviceChoice::Cpu;
  LLMEngine g(cfg), c(ccfg);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 150; ++i) prompt.push_back(3 + (i * 37) % 500);
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.seed = 1;
  sp.max_tokens = 10;
  sp.ignore_eos = true;
  sp.logit_bias = {{77, 100.0f}};
  sp.prompt_logprobs = 3;
  sp.logprobs = 2;
  sp.repetition_penalty = 1.2f;
  auto run = [&](LLMEngine& e) {
    e.add_request(prompt, sp);
    RequestOutput out;
    while (e.has_unfinished())
      for (auto& o : e.step().finished) out = o;
    return out;
  };
  const RequestOutput go = run(g), co = run(c);
  EXPECT_EQ(go.token_ids, std::vector<int32_t>(10, 77));
  ASSERT_EQ(go.prompt_logprobs.size(), prompt.size() - 1);
  ASSERT_EQ(co.prompt_logprobs.size(), prompt.size() - 1);
  double worst = 0;
  for (size_t i = 0; i < prompt.size() - 1; ++i)
    worst = std::max(worst, double(std::abs(go.prompt_logprobs[i].logprob - co.prompt_logprobs[i].logprob)));
  std::printf("[gpu] prompt logprobs: max |GPU - CPU| %.3e over %zu positions\n", worst, prompt.size() - 1);
  EXPECT_LT(worst, 0.2);
  ASSERT_EQ(go.logprobs.size(), 10u);
  for (auto& t : go.logprobs) EXPECT_EQ(t.top.size(), 2u);
}
