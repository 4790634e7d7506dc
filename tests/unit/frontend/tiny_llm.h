// The front-end tests' LLM: the tiny Qwen3 model on the CPU (tiny_engine.h) with the real Qwen3
// tokenizer (npm data), 16-token blocks.
#pragma once
#include <cstdint>

#include "nanovllm/frontend/llm.h"
#include "test_paths.h"
#include "tiny_engine.h"

namespace nanovllm::test {

inline LLM tiny_qwen3_llm(int64_t max_num_seqs = 0) {
  EngineConfig cfg = tiny_cfg();
  cfg.block_size = 16;
  if (max_num_seqs > 0) cfg.max_num_seqs = max_num_seqs;
  return LLM(cfg, qwen3_tokenizer_dir());
}

}  // namespace nanovllm::test
