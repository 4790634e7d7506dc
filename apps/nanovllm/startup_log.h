// The start-up summary `serve` logs once the model is loaded, as vLLM does: model, dtype,
// device(s), KV cache blocks and tokens, max_model_len and concurrency, CUDA graphs, and the
// default sampling parameters taken from the model's generation config.
#pragma once
#include "nanovllm/frontend/llm.h"
#include "nanovllm/server/server_options.h"

namespace nanovllm::cli {

void log_startup(const server::ServerOptions& opts, const LLM& llm);

}  // namespace nanovllm::cli
