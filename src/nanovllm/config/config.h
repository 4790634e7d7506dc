// Model and engine configuration.
//  ModelConfig: what config.json / generation_config.json say about the network.
//  EngineConfig: how we run it (nano-vllm's Config, with vLLM's flag names in the CLI). Its
//  user-facing fields are declared, with their flags, keywords and help, in settings.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/config/engine_choices.h"
#include "nanovllm/config/kernel_options.h"
#include "nanovllm/config/kv_cache_dtype.h"
#include "nanovllm/config/pooling_config.h"
#include "nanovllm/config/quantization.h"
#include "nanovllm/config/speculative_config.h"
#include "nanovllm/config/structured_outputs_config.h"

namespace nanovllm {

// RoPE scaling beyond rope_theta (config.json's rope_scaling, or transformers 5's rope_parameters).
// YaRN and Llama 3's are implemented; the fields keep transformers' names and defaults.
struct RopeScaling {
  std::string type = "default";                      // "default" (plain RoPE), "yarn" or "llama3"
  double factor = 1;                                 // context extension: factor * original_max_position_embeddings
  int64_t original_max_position_embeddings = 0;      // the pre-training context length
  std::optional<double> attention_factor;            // cos/sin scale; unset: from factor (and mscale)
  double beta_fast = 32, beta_slow = 1;              // rotations bounding the interpolation ramp
  double mscale = 0, mscale_all_dim = 0;             // DeepSeek's form of the attention factor; 0: unused
  bool truncate = true;                              // round the ramp's bounds to whole dimensions
  double low_freq_factor = 1, high_freq_factor = 4;  // llama3: the band of wavelengths that is blended

  bool is_yarn() const { return type == "yarn"; }
  bool is_llama3() const { return type == "llama3"; }
};

struct ModelConfig {
  std::string architecture = "Qwen3ForCausalLM";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  std::string torch_dtype = "bfloat16";
  std::vector<int32_t> eos_token_ids;  // generation_config.json wins over config.json
  std::optional<int32_t> bos_token_id;
  // > 0: the layers marked in sliding_layers (all of them when it is empty) attend only to the
  // last `sliding_window` keys, themselves included (Mistral; Qwen2/3 with use_sliding_window).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // [num_hidden_layers] or empty
  // Mixture of experts (Qwen3MoeForCausalLM; 0 experts: a dense model). A sparse layer's MLP routes
  // each token to num_experts_per_tok of num_experts SwiGLU experts of moe_intermediate_size; the
  // other layers keep a dense MLP of intermediate_size (see is_moe_layer).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;           // renormalize the top-k routing weights to sum to 1
  int64_t decoder_sparse_step = 1;       // layer i is sparse when (i + 1) % decoder_sparse_step == 0 ...
  std::vector<int64_t> mlp_only_layers;  // ... and i is not listed here
  // The checkpoint's weights: FP8 for config.json's quantization_config of Qwen's FP8 checkpoints
  // (models/fp8_checkpoint.h), AWQ, GPTQ or CompressedTensors for group-quantized integer weights
  // (described by int_checkpoint: models/int_config.h), else None.
  Quantization checkpoint_quantization = Quantization::None;
  IntCheckpointFormat int_checkpoint;
  // Pooling (models/pooling_model.h). A *ForSequenceClassification checkpoint runs as the causal LM
  // of its family (architecture) with a classification head score.weight [num_labels, H] instead of
  // the LM head: declared_architecture keeps config.json's name, num_labels its labels (else 0).
  std::string declared_architecture;
  int64_t num_labels = 0;
  bool is_matryoshka = false;                  // embeddings may be cut to `dimensions`
  std::vector<int64_t> matryoshka_dimensions;  // the cuts it was trained for (empty: any)

  // Whether layer i's MLP is the sparse MoE block (transformers' Qwen3MoeDecoderLayer).
  bool is_moe_layer(int64_t i) const {
    if (num_experts <= 0 || (i + 1) % decoder_sparse_step != 0) return false;
    for (int64_t j : mlp_only_layers)
      if (j == i) return false;
    return true;
  }

  // The window of layer i: 0 = full attention.
  int64_t layer_window(int64_t i) const {
    if (sliding_window <= 0) return 0;
    return sliding_layers.empty() || (size_t(i) < sliding_layers.size() && sliding_layers[size_t(i)]) ? sliding_window
                                                                                                      : 0;
  }

  // The longest context the model is made for, as vLLM derives it (_get_and_verify_max_len):
  // max_position_embeddings, or for YaRN factor * original_max_position_embeddings, whatever
  // max_position_embeddings says (Qwen3's YaRN recipe keeps 40960 there and reaches 131072);
  // llama3 scaling keeps max_position_embeddings (Llama 3.1: 131072).
  int64_t derived_max_model_len() const;
  // Parameters of the network, or nullopt when the count overflows int64.
  std::optional<int64_t> checked_num_parameters() const;

  int64_t q_size() const { return num_attention_heads * head_dim; }
  int64_t kv_size() const { return num_key_value_heads * head_dim; }
};

struct EngineConfig {
  std::string model;  // directory, Hugging Face id (ORG/NAME) or preset name: the name shown
  // The local directory the model loads from: `model` resolved once (settle_model_dir, hf_hub.h),
  // e.g. an id's snapshot in the Hugging Face cache. Empty: not settled yet, or a preset.
  std::string model_dir;
  std::string revision = "main";   // --revision: an id's branch, tag or commit hash
  std::string download_dir;        // --download-dir: a Hugging Face cache root searched first
  std::string tokenizer_revision;  // --tokenizer-revision: the tokenizer's revision; empty: revision's
  std::string code_revision;       // --code-revision: vLLM's; accepted, no remote code runs
  bool load_dummy = false;         // --load-format dummy
  DeviceChoice device = DeviceChoice::Auto;
  int64_t max_num_seqs = 512;
  int64_t max_num_batched_tokens = 16384;
  // Longest prompt + output. 0 (unset): the model's (ModelConfig::derived_max_model_len), lowered
  // to what the KV cache holds; set: refused when above the model's or more than the cache holds.
  int64_t max_model_len = 0;
  int64_t block_size = 256;
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_memory = 0;                       // bytes of KV cache; 0 = automatic (CPU: 4 GiB or what fits)
  int64_t num_kvcache_blocks = 0;                    // explicit block count (tests); overrides kv_cache_memory
  KVCacheDtype kv_cache_dtype = KVCacheDtype::Auto;  // --kv-cache-dtype (kv_cache_dtype.h)
  Quantization quantization = Quantization::None;    // --quantization (quantization.h)
  bool enforce_eager = false;
  int tensor_parallel_size = 1;
  // Tensor parallelism: this process's rank, the nodes it spans (each runs N / nnodes ranks, on
  // GPUs rank % (N / nnodes)), and where rank 0 listens for the others.
  int tp_rank = 0;
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  double tp_connect_timeout_s = 120;  // for all ranks to show up
  // Called (on a watchdog thread) when another rank dies; must end the process. Unset: dead
  // peers are still detected where this rank talks to them, but not inside an NCCL collective.
  std::function<void(const std::string&)> on_tp_peer_lost;
  bool enable_prefix_caching = true;
  // Mixed steps: running decodes share each step's token budget with chunks of waiting prompts
  // (vLLM V1). Off: nano-vllm's prefill-first steps (scheduler.h has both policies).
  bool enable_chunked_prefill = true;
  // The latency target of mixed steps (scheduler.h): a step that decodes running streams takes
  // only the prompt tokens its learnt cost model (step_cost_model.h) fits in this many
  // milliseconds. 0: off (the token budget alone). Unset (-1): kServeTargetItlMs in `serve` on a
  // GPU (settle_target_itl), off elsewhere (offline generate/bench keep throughput first).
  double target_itl_ms = -1;
  // vLLM's partial prefills: at most max_num_partial_prefills prompts are part-way computed at a
  // time, at most max_long_partial_prefills of them longer than long_prefill_token_threshold
  // tokens (shorter ones may then go ahead of a long one); a prompt takes at most that many tokens
  // per step (vLLM V1). Threshold 0: none, or 4% of max_model_len when partial prefills > 1.
  int64_t max_num_partial_prefills = 1;
  int64_t max_long_partial_prefills = 1;
  int64_t long_prefill_token_threshold = 0;
  // Async scheduling (vLLM's --async-scheduling; engine/llm_engine.h): a decode step is launched
  // before the previous step's tokens reach the host, its input ids read on the device, so the
  // GPU does not wait for the host between steps. Outputs are the same. Unset: on where the
  // backend runs ahead of the host (CUDA), off on the CPU.
  std::optional<bool> async_scheduling;
  uint64_t seed = 0;  // engine seed for requests without their own
  // Most logprobs a request may ask for (vLLM's --max-logprobs; -1: the vocabulary).
  int max_logprobs = 20;
  // Bounds on what one server request may ask (server/request_caps.cpp: a 400 naming the field and
  // the setting), so that a small body cannot cost the server out of proportion to its size.
  int max_stop_strings = 128;                    // stop strings per request
  int64_t max_stop_bytes = 16 << 10;             // their bytes together
  int max_request_id_length = 512;               // request_id / X-Request-Id bytes
  int64_t max_prompt_logprob_entries = 1 << 20;  // prompt_logprobs: prompt tokens x (k + 1), all prompts
  // The server's pool that renders chat templates and tokenizes prompts off the HTTP I/O threads
  // (server/request_pool.h): threads (0: min(4, cores)) and requests waiting for one (past it: 503).
  int request_threads = 0;
  int max_queued_requests = 1024;
  // The server's store of /v1/responses (store=true): JSON bytes kept, oldest evicted past it.
  int64_t responses_store_bytes = 64 << 20;
  // What logprobs are computed from (vLLM's --logprobs-mode): raw_logprobs (the model's logits) or
  // processed_logprobs (after penalties, logit_bias, min_tokens and temperature).
  LogprobsMode logprobs_mode = LogprobsMode::RawLogprobs;
  SchedulingPolicy scheduling_policy = SchedulingPolicy::Fcfs;  // vLLM's --scheduling-policy
  int num_threads = 0;                                          // CPU backend threads; 0 = all cores
  CpuPrecision cpu_precision = CpuPrecision::Fast;              // the CPU backend's arithmetic
  bool profile_ops = false;                                     // time every op (ProfilingBackend; implies eager)
  KernelOptions kernels;  // CUDA kernel tuning knobs (kernel_options.h); rank 0's go to every rank
  // --structured-outputs-config (structured_outputs_config.h): read by the front ends (request
  // defaults, the reasoning start); rank 0 only.
  StructuredOutputsConfig structured_outputs_config;
  // --speculative-config (speculative_config.h): the drafter and its tokens per step; off when unset.
  SpeculativeConfig speculative_config;
  // Pooling models (config/pooling_config.h, models/pooling_model.h): the runner (pooling: prefill-
  // only steps whose final hidden states go to a pooler, no sampler), how a causal LM is converted,
  // the pooler's settings and the config overrides pooling reads.
  RunnerChoice runner = RunnerChoice::Auto;
  ConvertChoice convert = ConvertChoice::Auto;
  PoolerConfig pooler_config;
  HfOverrides hf_overrides;
  // hf_overrides.classifier_from_token as token ids (the front end resolves them with the
  // tokenizer, which the engine does not link); tests may set them directly.
  std::vector<int32_t> classifier_token_ids;

  // Throws UserError naming the bad field: each setting's own range (settings.cpp), then the rules
  // between settings. Run once, where the settings are parsed (the CLI, the Python keywords) or
  // where a C++ caller hands its config to the engine (LLMEngine).
  void validate() const;
  // What loaders open: model_dir once settled, else model itself (a directory, or a preset).
  const std::string& model_path() const { return model_dir.empty() ? model : model_dir; }
  bool max_model_len_is_auto() const { return max_model_len == 0; }
  int ranks_per_node() const { return tensor_parallel_size / nnodes; }
  int local_rank() const { return tp_rank % ranks_per_node(); }  // the GPU index on this node
};

// The context length, settled in one place: an explicit max_model_len checked against the model
// (above derived_max_model_len: a UserError, as vLLM) or, unset, the model's length; then, once
// the KV cache's size is known (kv_blocks of cfg.block_size tokens), against the cache: an
// explicit length it cannot hold is a UserError (as vLLM), an unset one is lowered to the whole
// blocks it holds, and *note (if given) says so. Every tensor-parallel rank has the same block
// count, hence the same length.
// The latency target `serve` uses when --target-itl-ms is unset, chosen from measurement
// (bench/RESULTS.md, issue 44): on Qwen3-8B (H200) with 64 streams, a 32K prompt arriving keeps
// their ITL p99 at ~60 ms and its TTFT at ~1.3x its idle TTFT (50: 55 ms / 1.34x; 60: 66 ms / 1.26x).
inline constexpr double kServeTargetItlMs = 55;
// Settles an unset target_itl_ms: kServeTargetItlMs when serving on a GPU, else off.
void settle_target_itl(EngineConfig& cfg, bool serving, bool on_gpu);
// long_prefill_token_threshold as the scheduler applies it (vLLM's rule for 0), max_model_len settled.
int64_t effective_long_prefill_threshold(const EngineConfig& cfg);

int64_t settle_max_model_len(const EngineConfig& cfg, const ModelConfig& mcfg,
                             std::optional<int64_t> kv_blocks = std::nullopt, std::string* note = nullptr);

}  // namespace nanovllm
