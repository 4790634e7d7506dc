#include "engine_flags.h"

#include <cstdio>
#include <cstdlib>

#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/utils/error.h"
#include "vllm_flags.h"

namespace nanovllm::cli {

void EngineFlags::add_to(CLI::App& app) {
  app.add_option(
      "MODEL", model_arg,
      "model directory, or a built-in preset (qwen3-0.6b, qwen3-1.7b, qwen3-8b, qwen3-30b-a3b, qwen2.5-0.5b, "
      "qwen2.5-7b, llama-3.2-1b, llama-3.1-8b, mistral-7b)");
  app.add_option("--model,-m", cfg.model, "the model, as MODEL (both given: they must agree)");
  add_vllm_engine_flags(app, *this);
  app.add_option("--load-format", load_format, "auto (safetensors) or dummy (random weights)")
      ->check(CLI::IsMember({"auto", "safetensors", "dummy"}));
  app.add_option("--tokenizer", tokenizer, "tokenizer directory (default: the model's, or the Qwen3 one for presets)");
  app.add_option("--device", cfg.device, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--max-model-len", cfg.max_model_len,
                 "longest prompt + output (default: the model's, lowered to what the KV cache holds)");
  app.add_option("--max-num-seqs", cfg.max_num_seqs, "most sequences per batch");
  app.add_option("--max-num-batched-tokens", cfg.max_num_batched_tokens, "most tokens per step");
  app.add_option("--block-size", cfg.block_size, "tokens per KV cache block");
  app.add_option("--gpu-memory-utilization", cfg.gpu_memory_utilization, "fraction of GPU memory to use");
  app.add_option("--kv-cache-memory", cfg.kv_cache_memory, "bytes of KV cache (CPU; default 4 GiB)");
  app.add_flag("--enforce-eager", cfg.enforce_eager, "no CUDA graphs");
  app.add_option("--tensor-parallel-size", cfg.tensor_parallel_size, "ranks (GPUs) to shard the model over (-tp)");
  app.add_option("--nnodes", cfg.nnodes, "hosts the ranks span (each runs tensor-parallel-size / nnodes)");
  app.add_option("--node-rank", cfg.node_rank, "this host's index in [0, nnodes)");
  app.add_option("--master-addr", cfg.master_addr, "where rank 0 listens for the other ranks");
  app.add_option("--master-port", cfg.master_port, "rank 0's port (default: a free one on a single host)");
  app.add_option("--rank", rank, "start just this rank (manual start; starts no other process)");
  app.add_option("--tp-spawned-rank", spawned_rank)->group("");  // hidden: the launcher's workers
  app.add_option("--tp-spawned-port", spawned_port)->group("");
  app.add_flag("--enable-prefix-caching", prefix_caching, "reuse KV blocks of shared prefixes (default on)");
  app.add_flag("--no-enable-prefix-caching", no_prefix_caching, "turn prefix caching off");
  app.add_flag("--enable-chunked-prefill", chunked_prefill,
               "mixed steps: running streams decode while long prompts are read in chunks (default on)");
  app.add_flag("--no-enable-chunked-prefill", no_chunked_prefill,
               "nano-vllm's prefill-first steps: a new prompt pauses every running stream until it is read");
  app.add_flag("--async-scheduling", async_scheduling,
               "launch each decode step before the last one's tokens reach the host (default on CUDA)");
  app.add_flag("--no-async-scheduling", no_async_scheduling, "wait for each step's tokens before the next step");
  app.add_option("--threads", cfg.num_threads, "CPU backend threads (default: all cores)");
  app.add_option("--max-logprobs", cfg.max_logprobs, "most logprobs a request may ask for (-1: the vocabulary)");
  app.add_option("--logprobs-mode", cfg.logprobs_mode,
                 "raw_logprobs (default: from the model's logits) or processed_logprobs (after penalties, "
                 "logit_bias and temperature)");
  app.add_option("--kernel-options", kernel_options,
                 "CUDA kernel tuning, KEY=VALUE[,KEY=VALUE...]: pdl, gemv_norm, max_decode_splits, decode_cluster, "
                 "decode_warps, decode_read_ahead, p2p_all_reduce, all_reduce_norm, prefill_attention, fp8_gemm; "
                 "the CPU's cpu_precision=fast|exact (README: GPU)");
}

std::string chosen_model(const std::string& positional, const std::string& flag) {
  if (!positional.empty() && !flag.empty() && positional != flag)
    throw UserError("the model is given twice and differently: MODEL '" + positional + "' and --model '" + flag + "'");
  const std::string m = positional.empty() ? flag : positional;
  if (m.empty()) throw UserError("no model: give it as the first argument (e.g. nanovllm serve MODEL) or with --model");
  return m;
}

std::string EngineFlags::model() const { return chosen_model(model_arg, cfg.model); }

EngineConfig EngineFlags::resolve() const {
  EngineConfig c = cfg;
  c.model = model();
  c.load_dummy = load_format == "dummy";
  if (prefix_caching && no_prefix_caching)
    throw UserError("--enable-prefix-caching and --no-enable-prefix-caching contradict each other");
  c.enable_prefix_caching = !no_prefix_caching;
  if (chunked_prefill && no_chunked_prefill)
    throw UserError("--enable-chunked-prefill and --no-enable-chunked-prefill contradict each other");
  c.enable_chunked_prefill = !no_chunked_prefill;
  if (async_scheduling && no_async_scheduling)
    throw UserError("--async-scheduling and --no-async-scheduling contradict each other");
  if (async_scheduling || no_async_scheduling) c.async_scheduling = async_scheduling;
  c.kv_cache_dtype = parse_kv_cache_dtype(kv_cache_dtype);
  c.quantization = parse_quantization(quantization);
  if (spawned_rank >= 0) {
    c.tp_rank = spawned_rank;
    c.master_port = spawned_port;
  } else if (rank >= 0) {
    c.tp_rank = rank;
  } else if (c.nnodes > 0 && c.tensor_parallel_size % c.nnodes == 0) {
    c.tp_rank = c.node_rank * c.ranks_per_node();  // this process; the launcher starts the node's others
  }
  if (rank >= 0 && c.tensor_parallel_size > 1 && c.master_port == 0)
    throw UserError("--rank: a manual start needs --master-port (and --master-addr unless rank 0 is on this host)");
  // Kernel options: rank 0's only (it sends them to the other ranks, whose own are not used).
  if (c.tp_rank == 0) {
    apply_kernel_env_overrides(c.kernels, [](const char* name) { return std::getenv(name); });
    if (!kernel_options.empty()) apply_kernel_options(c.kernels, kernel_options);
  }
  check_vllm_engine_flags(*this, c);
  c.validate();
  return c;
}

void print_kernel_options(const EngineConfig& cfg) {
  if (cfg.tp_rank != 0) return;
  if (cfg.kv_cache_dtype != KVCacheDtype::Auto)
    std::fprintf(stderr, "kv cache dtype: %s\n", kv_cache_dtype_name(cfg.kv_cache_dtype));
  if (cfg.quantization != Quantization::None)
    std::fprintf(stderr, "quantization: %s\n", quantization_name(cfg.quantization));
  if (resolved_device(cfg) != "cuda") return;
  std::fprintf(stderr, "kernel options: %s\n", cfg.kernels.to_string().c_str());
  std::fflush(stderr);
}

}  // namespace nanovllm::cli
