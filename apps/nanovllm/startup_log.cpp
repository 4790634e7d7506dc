#include "startup_log.h"

#include <cstdio>

#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/version.h"

namespace nanovllm::cli {

namespace {

// vLLM's (torch's) names for the dtypes the backends compute in.
std::string torch_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    default: return dtype_name(t);
  }
}

}  // namespace

void log_startup(const server::ServerOptions& opts, const LLM& llm) {
  const Logger& log = opts.logger;
  const EngineConfig& cfg = llm.config();
  const EngineInfo e = llm.engine_info();
  log.info(std::string("nano-vllm API server version ") + kVersion);
  const std::string devices =
      e.backend + (cfg.tensor_parallel_size > 1 ? " x " + std::to_string(cfg.tensor_parallel_size) + " ranks" : "");
  log.info("Model " + cfg.model + " (" + llm.model_config().architecture + "), dtype " + torch_name(e.act_dtype) +
           ", device " + devices + ", tensor_parallel_size " + std::to_string(cfg.tensor_parallel_size));
  const int64_t blocks = e.num_kv_blocks, tokens = blocks * cfg.block_size;
  char conc[32];
  std::snprintf(conc, sizeof conc, "%.2f", double(tokens) / double(cfg.max_model_len));
  log.info("KV cache: " + std::to_string(blocks) + " blocks of " + std::to_string(cfg.block_size) +
           " tokens = " + std::to_string(tokens) + " tokens; max_model_len " + std::to_string(cfg.max_model_len) +
           "; maximum concurrency for " + std::to_string(cfg.max_model_len) + " tokens per request: " + conc +
           "x; stored as " + dtype_name(e.kv_cache_dtype) + " (--kv-cache-dtype " +
           kv_cache_dtype_name(cfg.kv_cache_dtype) + ")");
  if (e.uses_cuda_graphs)
    log.info("CUDA graphs: " + std::to_string(e.num_cuda_graphs) + " decode graphs captured");
  else
    log.info(std::string("CUDA graphs: none (") + (e.device == Device::CUDA ? "--enforce-eager" : "CPU backend") + ")");
  if (!opts.defaults.empty()) log.info(opts.defaults.log_line());
}

}  // namespace nanovllm::cli
