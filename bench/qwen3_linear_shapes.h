// The linear layers of Qwen3-0.6B and Qwen3-8B as [N, K] weights (qkv, o, gate_up, down), shared by
// the GEMM benchmarks (prefill_bench.cpp, gemm_bench.cpp).
#pragma once
#include <cstdint>

namespace nanovllm::bench {

struct LinearShape {
  const char* model;
  const char* layer;
  int64_t n, k;
};

inline constexpr LinearShape kQwen3LinearShapes[] = {
    {"qwen3-0.6b", "qkv", 4096, 1024},    {"qwen3-0.6b", "o", 1024, 2048},  {"qwen3-0.6b", "gate_up", 6144, 1024},
    {"qwen3-0.6b", "down", 1024, 3072},   {"qwen3-8b", "qkv", 6144, 4096},  {"qwen3-8b", "o", 4096, 4096},
    {"qwen3-8b", "gate_up", 24576, 4096}, {"qwen3-8b", "down", 4096, 12288}};

}  // namespace nanovllm::bench
