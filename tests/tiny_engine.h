// Helpers of the engine tests on the tiny fixtures: a CPU engine over the untied model (or another
// directory), seeded random prompts inside its vocabulary (never bos or eos), greedy sampling.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/config/sampling_params.h"
#include "test_paths.h"

namespace nanovllm::test {

inline EngineConfig tiny_cfg(const std::string& model = fixture("tiny-qwen3-untied")) {
  EngineConfig cfg;
  cfg.model = model;
  cfg.device = DeviceChoice::Cpu;
  cfg.cpu_precision = CpuPrecision::Exact;  // the oracle: tests compare with transformers' FP32
  cfg.kv_cache_memory = 32 << 20;
  return cfg;
}

inline std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(3 + rng() % 690);
  return t;
}

inline SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace nanovllm::test
