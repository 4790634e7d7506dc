// The engine settings table (settings.h): each entry binds a setting's spellings and help to its
// EngineConfig field through small typed accessors (int_field, enum_field, ...).
#include <limits>
#include <type_traits>

#include "nanovllm/config/settings.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

std::string type_name(SettingType t) {
  switch (t) {
    case SettingType::Bool:
    case SettingType::OptionalBool: return "a bool";
    case SettingType::Int: return "an int";
    case SettingType::Float: return "a number";
    case SettingType::Text:
    case SettingType::Choice: return "a string";
  }
  return "?";
}

[[noreturn]] void wrong_type(const Setting& s, const SettingValue& v) {
  throw UserError(s.flag() + " must be " + type_name(s.type) + " (got '" + setting_text(v) + "')");
}

int64_t as_int(const Setting& s, const SettingValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  wrong_type(s, v);
}

double as_float(const Setting& s, const SettingValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  wrong_type(s, v);
}

bool as_bool(const Setting& s, const SettingValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  wrong_type(s, v);
}

const std::string& as_text(const Setting& s, const SettingValue& v) {
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  wrong_type(s, v);
}

// Typed access to one EngineConfig field: what an entry's get and assign are made of.
struct Access {
  std::function<SettingValue(const EngineConfig&)> get;
  std::function<void(const Setting&, EngineConfig&, const SettingValue&)> assign;
};

template <class T>
Access int_field(T EngineConfig::*m) {
  return {[m](const EngineConfig& c) { return SettingValue(int64_t(c.*m)); },
          [m](const Setting& s, EngineConfig& c, const SettingValue& v) {
            const int64_t i = as_int(s, v);
            if constexpr (std::is_unsigned_v<T>) {
              if (i < 0) throw UserError(s.flag() + " must be >= 0 (got " + std::to_string(i) + ")");
            } else if (i < int64_t(std::numeric_limits<T>::min()) || i > int64_t(std::numeric_limits<T>::max())) {
              throw UserError(s.flag() + " " + std::to_string(i) + " is out of range");
            }
            c.*m = T(i);
          }};
}

Access float_field(double EngineConfig::*m) {
  return {[m](const EngineConfig& c) { return SettingValue(c.*m); },
          [m](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = as_float(s, v); }};
}

Access bool_field(bool EngineConfig::*m) {
  return {[m](const EngineConfig& c) { return SettingValue(c.*m); },
          [m](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = as_bool(s, v); }};
}

Access text_field(std::string EngineConfig::*m) {
  return {[m](const EngineConfig& c) { return SettingValue(c.*m); },
          [m](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = as_text(s, v); }};
}

template <class E>
Access enum_field(E EngineConfig::*m, const char* (*name)(E), E (*parse)(const std::string&, const std::string&)) {
  return {
      [m, name](const EngineConfig& c) { return SettingValue(std::string(name(c.*m))); },
      [m, parse](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = parse(as_text(s, v), s.flag()); }};
}

// kv_cache_dtype.h and quantization.h name the flag in their own messages.
template <class E>
Access named_enum_field(E EngineConfig::*m, const char* (*name)(E), E (*parse)(const std::string&)) {
  return {[m, name](const EngineConfig& c) { return SettingValue(std::string(name(c.*m))); },
          [m, parse](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = parse(as_text(s, v)); }};
}

Access async_scheduling_field() {
  return {[](const EngineConfig& c) { return c.async_scheduling ? SettingValue(*c.async_scheduling) : SettingValue(); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            if (std::holds_alternative<std::monostate>(v))
              c.async_scheduling.reset();
            else
              c.async_scheduling = as_bool(s, v);
          }};
}

// nano-vllm's -1 (and 0): the block count follows from the memory budget.
Access num_kvcache_blocks_field() {
  Access a = int_field(&EngineConfig::num_kvcache_blocks);
  a.assign = [](const Setting& s, EngineConfig& c, const SettingValue& v) {
    const int64_t n = as_int(s, v);
    c.num_kvcache_blocks = n == -1 ? 0 : n;
  };
  return a;
}

Access load_format_field() {
  return {[](const EngineConfig& c) { return SettingValue(std::string(c.load_dummy ? "dummy" : "auto")); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            const std::string& f = as_text(s, v);
            if (f != "auto" && f != "safetensors" && f != "dummy")
              throw UserError(s.flag() + " must be auto, safetensors or dummy (got '" + f + "')");
            c.load_dummy = f == "dummy";
          }};
}

// KEY=VALUE[,...] applied over the current options (the CLI's NANOVLLM_* overrides come first).
// cpu_precision=fast|exact, a kernel option before it became a setting of its own, still works
// here (scripts and tests use it). Every option's value is on the wire, so a worker ends up with
// rank 0's options whatever its own were.
Access kernel_options_field() {
  return {[](const EngineConfig& c) { return SettingValue(c.kernels.to_string(",")); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            const std::string& spec = as_text(s, v);
            std::string rest;
            size_t begin = 0;
            while (begin < spec.size()) {
              size_t end = spec.find(',', begin);
              if (end == std::string::npos) end = spec.size();
              const std::string pair = spec.substr(begin, end - begin);
              const std::string key = "cpu_precision=";
              if (pair.rfind(key, 0) == 0)
                c.cpu_precision = parse_cpu_precision(pair.substr(key.size()), s.flag() + ": cpu_precision");
              else
                rest += (rest.empty() ? "" : ",") + pair;
              begin = end + 1;
            }
            if (!rest.empty()) apply_kernel_options(c.kernels, rest);
          }};
}

// The JSON object of vLLM's --structured-outputs-config, over the defaults.
Access structured_outputs_config_field() {
  return {[](const EngineConfig& c) { return SettingValue(c.structured_outputs_config.to_json()); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            c.structured_outputs_config = StructuredOutputsConfig::parse(as_text(s, v), s.flag());
          }};
}

// The JSON object of vLLM's --speculative-config ("" when off).
Access speculative_config_field() {
  return {[](const EngineConfig& c) { return SettingValue(c.speculative_config.to_json()); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            c.speculative_config = SpeculativeConfig::parse(as_text(s, v), s.flag());
          }};
}

// vLLM's older --guided-decoding-backend: the backend of --structured-outputs-config.
Access guided_decoding_backend_field() {
  return {[](const EngineConfig& c) { return SettingValue(c.structured_outputs_config.backend); },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            const std::string& name = as_text(s, v);
            if (!is_structured_backend(name)) throw UserError(unknown_structured_backend(s.flag(), name));
            c.structured_outputs_config.backend = name;
          }};
}

// vLLM's older --task: sets --runner and --convert (pooling_config.h); read back from them.
Access task_field() {
  return {[](const EngineConfig& c) {
            if (c.runner == RunnerChoice::Generate) return SettingValue(std::string("generate"));
            if (c.runner != RunnerChoice::Pooling) return SettingValue(std::string("auto"));
            return SettingValue(std::string(c.convert == ConvertChoice::Classify ? "classify" : "embed"));
          },
          [](const Setting& s, EngineConfig& c, const SettingValue& v) {
            const TaskChoice t = parse_task(as_text(s, v), s.flag());
            c.runner = t.runner;
            c.convert = t.convert;
          }};
}

template <class T>
Access json_field(T EngineConfig::*m) {
  return {[m](const EngineConfig& c) { return SettingValue((c.*m).to_json()); },
          [m](const Setting& s, EngineConfig& c, const SettingValue& v) { c.*m = T::parse(as_text(s, v), s.flag()); }};
}

Setting bind(Access a, Setting s) {
  s.get = std::move(a.get);
  s.assign = std::move(a.assign);
  return s;
}

// A check that an integer field is positive: "--max-num-seqs must be positive (got 0)".
template <class T>
std::function<void(const Setting&, const EngineConfig&)> positive(T EngineConfig::*m) {
  return [m](const Setting& s, const EngineConfig& c) {
    if (c.*m <= 0) throw UserError(s.flag() + " must be positive (got " + std::to_string(c.*m) + ")");
  };
}

std::vector<Setting> make_settings() {
  using T = SettingType;
  using C = EngineConfig;
  std::vector<Setting> t;
  // Models by Hugging Face id, from the local cache only (hf_hub.h); not sent to tensor-parallel
  // workers: each resolves the model from its own command line before it hears from rank 0.
  t.push_back(bind(text_field(&C::revision),
                   {.name = "revision",
                    .type = T::Text,
                    .help = "the revision of a Hugging Face id MODEL: a branch, tag or commit hash, looked up in the "
                            "local Hugging Face cache (nothing is downloaded)",
                    .flags = {"--revision"},
                    .keywords = {"revision"},
                    .python_none = true}));
  t.push_back(bind(text_field(&C::download_dir),
                   {.name = "download_dir",
                    .type = T::Text,
                    .help = "a Hugging Face cache directory (as huggingface_hub lays it out) searched for ids before "
                            "$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub",
                    .flags = {"--download-dir"},
                    .keywords = {"download_dir"},
                    .python_none = true}));
  t.push_back(bind(text_field(&C::tokenizer_revision),
                   {.name = "tokenizer_revision",
                    .type = T::Text,
                    .help = "the revision of the tokenizer's Hugging Face id (--tokenizer, else the model's)",
                    .flags = {"--tokenizer-revision"},
                    .keywords = {"tokenizer_revision"},
                    .python_none = true,
                    .shown_default = "--revision's"}));
  t.push_back(bind(text_field(&C::code_revision),
                   {.name = "code_revision",
                    .type = T::Text,
                    .help = "vLLM's revision of remote model code: accepted with a note; no remote code runs",
                    .flags = {"--code-revision"},
                    .keywords = {"code_revision"},
                    .python_none = true}));
  t.push_back(bind(load_format_field(),
                   {.name = "load_format",
                    .type = T::Choice,
                    .help = "where the weights come from: the model's safetensors (auto, safetensors) or random "
                            "ones (dummy)",
                    .flags = {"--load-format"},
                    .keywords = {"load_format"},
                    .choices = {"auto", "safetensors", "dummy"},
                    .travels = true}));
  t.push_back(bind(enum_field(&C::device, device_choice_name, parse_device_choice),
                   {.name = "device",
                    .type = T::Choice,
                    .help = "the backend: auto is cuda when a GPU is present",
                    .flags = {"--device"},
                    .keywords = {"device"},
                    .choices = {"auto", "cpu", "cuda"},
                    .travels = true}));
  t.push_back(bind(int_field(&C::max_model_len),
                   {.name = "max_model_len",
                    .type = T::Int,
                    .help = "longest prompt + output; 0: the model's, lowered to what the KV cache holds",
                    .flags = {"--max-model-len"},
                    .keywords = {"max_model_len"},
                    .range = ">= 0",
                    .travels = true,
                    .size_suffixes = true,
                    .check = [](const Setting&, const C& c) {
                      if (c.max_model_len < 0)
                        throw UserError("--max-model-len must be positive, or 0 for the model's length (got " +
                                        std::to_string(c.max_model_len) + ")");
                    }}));
  t.push_back(bind(int_field(&C::max_num_seqs), {.name = "max_num_seqs",
                                                 .type = T::Int,
                                                 .help = "most sequences per batch",
                                                 .flags = {"--max-num-seqs"},
                                                 .keywords = {"max_num_seqs"},
                                                 .range = "> 0",
                                                 .travels = true,
                                                 .check = positive(&C::max_num_seqs)}));
  t.push_back(
      bind(int_field(&C::max_num_batched_tokens), {.name = "max_num_batched_tokens",
                                                   .type = T::Int,
                                                   .help = "most tokens per step (at least max_num_seqs and one block)",
                                                   .flags = {"--max-num-batched-tokens"},
                                                   .keywords = {"max_num_batched_tokens"},
                                                   .range = "> 0",
                                                   .travels = true,
                                                   .size_suffixes = true,
                                                   .check = positive(&C::max_num_batched_tokens)}));
  t.push_back(bind(int_field(&C::block_size), {.name = "block_size",
                                               .type = T::Int,
                                               .help = "tokens per KV cache block",
                                               .flags = {"--block-size"},
                                               .keywords = {"kvcache_block_size"},
                                               .range = "> 0",
                                               .travels = true,
                                               .check = positive(&C::block_size)}));
  t.push_back(bind(float_field(&C::gpu_memory_utilization),
                   {.name = "gpu_memory_utilization",
                    .type = T::Float,
                    .help = "fraction of GPU memory to use",
                    .flags = {"--gpu-memory-utilization"},
                    .keywords = {"gpu_memory_utilization"},
                    .range = "(0, 1]",
                    .travels = true,
                    .check = [](const Setting&, const C& c) {
                      if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1))
                        throw UserError("--gpu-memory-utilization must be in (0, 1] (got " +
                                        std::to_string(c.gpu_memory_utilization) + ")");
                    }}));
  t.push_back(bind(int_field(&C::kv_cache_memory),
                   {.name = "kv_cache_memory",
                    .type = T::Int,
                    .help = "bytes of KV cache; 0: automatic (the CPU: 4 GiB, at least one max_model_len sequence)",
                    .flags = {"--kv-cache-memory"},
                    .keywords = {"kv_cache_memory"},
                    .range = ">= 0",
                    .travels = true,
                    .size_suffixes = true,
                    .check = [](const Setting&, const C& c) {
                      if (c.kv_cache_memory < 0) throw UserError("--kv-cache-memory must be >= 0 bytes");
                    }}));
  t.push_back(bind(num_kvcache_blocks_field(),
                   {.name = "num_kvcache_blocks",
                    .type = T::Int,
                    .help = "KV cache blocks, overriding kv_cache_memory; -1 or 0: from the memory budget",
                    .keywords = {"num_kvcache_blocks"},
                    .travels = true}));
  t.push_back(bind(named_enum_field(&C::kv_cache_dtype, kv_cache_dtype_name, parse_kv_cache_dtype),
                   {.name = "kv_cache_dtype",
                    .type = T::Choice,
                    .help = "auto (the model dtype), bf16, or fp8 / fp8_e4m3 (E4M3 with per-layer scales: half "
                            "the bytes, twice the tokens)",
                    .flags = {"--kv-cache-dtype"},
                    .keywords = {"kv_cache_dtype"},
                    .choices = {"auto", "bf16", "fp8", "fp8_e4m3"},
                    .travels = true}));
  t.push_back(
      bind(named_enum_field(&C::quantization, quantization_name, parse_quantization),
           {.name = "quantization",
            .type = T::Choice,
            .help = "weights: none (as loaded), fp8 (E4M3, quantized at load or an FP8 checkpoint's), int8, "
                    "or awq, gptq, compressed-tensors (4/8-bit group-quantized: the checkpoint's, else "
                    "quantized at load); an AWQ/GPTQ/compressed-tensors checkpoint is detected without it",
            .flags = {"--quantization", "-q"},
            .keywords = {"quantization"},
            .python_none = true,
            .choices = {"none", "fp8", "int8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors"},
            .travels = true}));
  t.push_back(bind(bool_field(&C::enforce_eager), {.name = "enforce_eager",
                                                   .type = T::Bool,
                                                   .help = "no CUDA graphs",
                                                   .flags = {"--enforce-eager"},
                                                   .keywords = {"enforce_eager"},
                                                   .travels = true}));
  t.push_back(bind(int_field(&C::tensor_parallel_size), {.name = "tensor_parallel_size",
                                                         .type = T::Int,
                                                         .help = "ranks (GPUs) to shard the model over",
                                                         .flags = {"--tensor-parallel-size", "-tp"},
                                                         .keywords = {"tensor_parallel_size"},
                                                         .range = "> 0",
                                                         .check = positive(&C::tensor_parallel_size)}));
  t.push_back(bind(int_field(&C::nnodes), {.name = "nnodes",
                                           .type = T::Int,
                                           .help = "hosts the ranks span (each runs tensor_parallel_size / nnodes)",
                                           .flags = {"--nnodes"},
                                           .range = "> 0",
                                           .check = positive(&C::nnodes)}));
  t.push_back(bind(int_field(&C::node_rank), {.name = "node_rank",
                                              .type = T::Int,
                                              .help = "this host's index",
                                              .flags = {"--node-rank"},
                                              .range = "[0, nnodes)"}));
  t.push_back(bind(text_field(&C::master_addr), {.name = "master_addr",
                                                 .type = T::Text,
                                                 .help = "where rank 0 listens for the other ranks",
                                                 .flags = {"--master-addr"}}));
  t.push_back(bind(int_field(&C::master_port), {.name = "master_port",
                                                .type = T::Int,
                                                .help = "rank 0's port; 0: a free one (a single host)",
                                                .flags = {"--master-port"},
                                                .range = "[0, 65535]",
                                                .check = [](const Setting&, const C& c) {
                                                  if (c.master_port < 0 || c.master_port > 65535)
                                                    throw UserError("--master-port must be in [0, 65535]");
                                                }}));
  t.push_back(bind(bool_field(&C::enable_prefix_caching), {.name = "enable_prefix_caching",
                                                           .type = T::Bool,
                                                           .help = "reuse the KV blocks of shared prefixes",
                                                           .flags = {"--enable-prefix-caching"},
                                                           .off_flag = "--no-enable-prefix-caching",
                                                           .off_help = "turn prefix caching off",
                                                           .keywords = {"enable_prefix_caching"}}));
  t.push_back(bind(bool_field(&C::enable_chunked_prefill),
                   {.name = "enable_chunked_prefill",
                    .type = T::Bool,
                    .help = "mixed steps: running streams decode while long prompts are read in chunks",
                    .flags = {"--enable-chunked-prefill"},
                    .off_flag = "--no-enable-chunked-prefill",
                    .off_help = "nano-vllm's prefill-first steps: a new prompt pauses every running stream until "
                                "it is read",
                    .keywords = {"enable_chunked_prefill"}}));
  t.push_back(bind(float_field(&C::target_itl_ms),
                   {.name = "target_itl_ms",
                    .type = T::Float,
                    .help = "latency target of a step that decodes running streams: it takes only the prompt tokens "
                            "a cost model learnt from measured steps fits in this many ms (--max-num-batched-tokens "
                            "stays the upper bound); 0: off",
                    .flags = {"--target-itl-ms"},
                    .keywords = {"target_itl_ms"},
                    .range = ">= 0",
                    .shown_default = "unset: 55 in serve on a GPU, else off",
                    .check = [](const Setting&, const C& c) {
                      if (!(c.target_itl_ms >= 0 || c.target_itl_ms == -1))
                        throw UserError("--target-itl-ms must be >= 0 (0: off) (got " +
                                        std::to_string(c.target_itl_ms) + ")");
                    }}));
  t.push_back(
      bind(int_field(&C::max_num_partial_prefills), {.name = "max_num_partial_prefills",
                                                     .type = T::Int,
                                                     .help = "most prompts part-way computed at a time (vLLM's)",
                                                     .flags = {"--max-num-partial-prefills"},
                                                     .keywords = {"max_num_partial_prefills"},
                                                     .range = "> 0",
                                                     .check = positive(&C::max_num_partial_prefills)}));
  t.push_back(bind(int_field(&C::max_long_partial_prefills),
                   {.name = "max_long_partial_prefills",
                    .type = T::Int,
                    .help = "most prompts longer than --long-prefill-token-threshold part-way computed at a time; "
                            "below --max-num-partial-prefills, shorter prompts may go ahead of long ones (vLLM's)",
                    .flags = {"--max-long-partial-prefills"},
                    .keywords = {"max_long_partial_prefills"},
                    .range = "> 0",
                    .check = positive(&C::max_long_partial_prefills)}));
  t.push_back(bind(int_field(&C::long_prefill_token_threshold),
                   {.name = "long_prefill_token_threshold",
                    .type = T::Int,
                    .help = "a prompt longer than this is long, and takes at most this many tokens a step (vLLM's); "
                            "0: none, or 4% of max_model_len when --max-num-partial-prefills > 1",
                    .flags = {"--long-prefill-token-threshold"},
                    .keywords = {"long_prefill_token_threshold"},
                    .range = ">= 0",
                    .size_suffixes = true,
                    .check = [](const Setting&, const C& c) {
                      if (c.long_prefill_token_threshold < 0)
                        throw UserError("--long-prefill-token-threshold must be >= 0 (got " +
                                        std::to_string(c.long_prefill_token_threshold) + ")");
                    }}));
  t.push_back(
      bind(async_scheduling_field(),
           {.name = "async_scheduling",
            .type = T::OptionalBool,
            .help = "launch each decode (or pooling) step before the last one's tokens (pooled rows) reach the host; "
                    "unset: on CUDA",
            .flags = {"--async-scheduling"},
            .off_flag = "--no-async-scheduling",
            .off_help = "wait for each step's tokens before the next step",
            .keywords = {"async_scheduling"},
            .python_none = true}));
  t.push_back(bind(enum_field(&C::scheduling_policy, scheduling_policy_name, parse_scheduling_policy),
                   {.name = "scheduling_policy",
                    .type = T::Choice,
                    .help = "the order requests are served in: fcfs (first come, first served) or priority (a "
                            "request's priority, lower first, then arrival; lower-priority streams are preempted "
                            "first)",
                    .flags = {"--scheduling-policy"},
                    .keywords = {"scheduling_policy"},
                    .choices = {"fcfs", "priority"}}));
  t.push_back(bind(int_field(&C::seed), {.name = "seed",
                                         .type = T::Int,
                                         .help = "engine seed: requests without their own seed draw theirs from it",
                                         .flags = {"--seed"},
                                         .keywords = {"seed"},
                                         .range = ">= 0"}));
  t.push_back(bind(int_field(&C::max_logprobs), {.name = "max_logprobs",
                                                 .type = T::Int,
                                                 .help = "most logprobs a request may ask for; -1: the vocabulary",
                                                 .flags = {"--max-logprobs"},
                                                 .keywords = {"max_logprobs"},
                                                 .range = ">= -1",
                                                 .check = [](const Setting&, const C& c) {
                                                   if (c.max_logprobs < -1)
                                                     throw UserError(
                                                         "--max-logprobs must be -1 (the vocabulary) or >= 0 (got " +
                                                         std::to_string(c.max_logprobs) + ")");
                                                 }}));
  t.push_back(bind(int_field(&C::max_stop_strings), {.name = "max_stop_strings",
                                                     .type = T::Int,
                                                     .help = "server: most stop strings a request may give",
                                                     .flags = {"--max-stop-strings"},
                                                     .range = "> 0",
                                                     .check = positive(&C::max_stop_strings)}));
  t.push_back(bind(int_field(&C::max_stop_bytes), {.name = "max_stop_bytes",
                                                   .type = T::Int,
                                                   .help = "server: most bytes of a request's stop strings together",
                                                   .flags = {"--max-stop-bytes"},
                                                   .range = "> 0",
                                                   .size_suffixes = true,
                                                   .check = positive(&C::max_stop_bytes)}));
  t.push_back(bind(int_field(&C::max_request_id_length),
                   {.name = "max_request_id_length",
                    .type = T::Int,
                    .help = "server: most bytes of a request id (the request_id field or X-Request-Id header)",
                    .flags = {"--max-request-id-length"},
                    .range = "> 0",
                    .check = positive(&C::max_request_id_length)}));
  t.push_back(bind(int_field(&C::max_prompt_logprob_entries),
                   {.name = "max_prompt_logprob_entries",
                    .type = T::Int,
                    .help = "server: most prompt logprobs one request may return: prompt tokens x (prompt_logprobs "
                            "+ 1), over all its prompts",
                    .flags = {"--max-prompt-logprob-entries"},
                    .range = "> 0",
                    .size_suffixes = true,
                    .check = positive(&C::max_prompt_logprob_entries)}));
  t.push_back(bind(int_field(&C::request_threads),
                   {.name = "request_threads",
                    .type = T::Int,
                    .help = "server: threads that render chat templates and tokenize prompts, off the HTTP I/O "
                            "threads; 0: min(4, cores)",
                    .flags = {"--request-threads"},
                    .range = ">= 0",
                    .check = [](const Setting& s, const C& c) {
                      if (c.request_threads < 0)
                        throw UserError(s.flag() + " must be >= 0 (got " + std::to_string(c.request_threads) + ")");
                    }}));
  t.push_back(bind(int_field(&C::max_queued_requests),
                   {.name = "max_queued_requests",
                    .type = T::Int,
                    .help = "server: requests waiting for a --request-threads thread; past it, 503",
                    .flags = {"--max-queued-requests"},
                    .range = "> 0",
                    .check = positive(&C::max_queued_requests)}));
  t.push_back(bind(int_field(&C::responses_store_bytes),
                   {.name = "responses_store_bytes",
                    .type = T::Int,
                    .help = "server: bytes of stored /v1/responses responses and their conversations (store=true, "
                            "for GET and previous_response_id); past it the oldest are evicted; 0: none kept",
                    .flags = {"--responses-store-bytes"},
                    .range = ">= 0",
                    .size_suffixes = true,
                    .check = [](const Setting& s, const C& c) {
                      if (c.responses_store_bytes < 0)
                        throw UserError(s.flag() + " must be >= 0 (got " + std::to_string(c.responses_store_bytes) +
                                        ")");
                    }}));
  t.push_back(bind(enum_field(&C::logprobs_mode, logprobs_mode_name, parse_logprobs_mode),
                   {.name = "logprobs_mode",
                    .type = T::Choice,
                    .help = "what logprobs are computed from: the model's logits (raw_logprobs) or the logits after "
                            "penalties, logit_bias, min_tokens and temperature (processed_logprobs)",
                    .flags = {"--logprobs-mode"},
                    .keywords = {"logprobs_mode"},
                    .choices = {"raw_logprobs", "processed_logprobs"}}));
  t.push_back(bind(int_field(&C::num_threads), {.name = "num_threads",
                                                .type = T::Int,
                                                .help = "CPU backend threads; 0: all cores",
                                                .flags = {"--threads"},
                                                .keywords = {"num_threads"},
                                                .range = ">= 0"}));
  t.push_back(bind(enum_field(&C::cpu_precision, cpu_precision_name, parse_cpu_precision),
                   {.name = "cpu_precision",
                    .type = T::Choice,
                    .help = "the CPU backend's arithmetic: fast keeps weights in BF16 (GEMV/GEMM kernels for "
                            "AVX-512, AVX512_BF16, AVX2, chosen at run time); exact FP32 weights and OpenBLAS sgemm, "
                            "the oracle of the tests",
                    .flags = {"--cpu-precision"},
                    .keywords = {"cpu_precision"},
                    .choices = {"fast", "exact"},
                    .travels = true}));
  t.push_back(bind(kernel_options_field(),
                   {.name = "kernel_options",
                    .type = T::Text,
                    .help = "CUDA kernel tuning, KEY=VALUE[,KEY=VALUE...] (README: GPU); cpu_precision=fast|exact "
                            "is also taken",
                    .flags = {"--kernel-options"},
                    .keywords = {"kernel_options"},
                    .travels = true,
                    .shown_default = "the measured best",
                    .check = [](const Setting&, const C& c) { c.kernels.validate(); }}));
  t.push_back(bind(structured_outputs_config_field(),
                   {.name = "structured_outputs_config",
                    .type = T::Text,
                    .help = "vLLM's structured-output options, a JSON object: backend (auto, xgrammar, guidance, "
                            "outlines or nanovllm: all mean our own grammar engine), disable_any_whitespace (JSON "
                            "output compact unless a request allows any whitespace; default true, vLLM's is false), "
                            "disable_additional_properties and disable_fallback (accepted, no effect: schemas are "
                            "always strict and there is no other backend), enable_in_reasoning (constrain the "
                            "reasoning too), reasoning_parser (as serve --reasoning-parser)",
                    .flags = {"--structured-outputs-config"},
                    .keywords = {"structured_outputs_config"},
                    .shown_default = "backend auto, disable_any_whitespace true (vLLM: false)"}));
  t.push_back(bind(speculative_config_field(),
                   {.name = "speculative_config",
                    .type = T::Text,
                    .help = "speculative decoding, vLLM's JSON object: method ngram (prompt lookup: the longest "
                            "suffix of prompt_lookup_min..prompt_lookup_max tokens seen before proposes the tokens "
                            "that followed it), draft_model (model: a smaller model of the same vocabulary decodes "
                            "the drafts; model alone implies it) or eagle3 (model: an EAGLE-3 head's directory; "
                            "with --load-format dummy none: a random head), num_speculative_tokens, "
                            "disable_by_batch_size (no drafts while more sequences run), backoff (ours, default true: "
                            "rows whose drafts keep being rejected stop drafting for a while); the target verifies "
                            "them in one step, outputs unchanged. Under tensor parallelism a draft model or EAGLE-3 "
                            "head runs un-sharded on rank 0 (draft_tensor_parallel_size 1 only)",
                    .flags = {"--speculative-config"},
                    .keywords = {"speculative_config"},
                    .shown_default = "off"}));
  t.push_back(bind(guided_decoding_backend_field(),
                   {.name = "guided_decoding_backend",
                    .type = T::Choice,
                    .help = "vLLM's older name of structured_outputs_config's backend: every accepted name means our "
                            "own grammar engine",
                    .flags = {"--guided-decoding-backend"},
                    .keywords = {"guided_decoding_backend"},
                    .choices = {"auto", "xgrammar", "guidance", "outlines", "nanovllm"}}));
  t.push_back(bind(enum_field(&C::runner, runner_choice_name, parse_runner_choice),
                   {.name = "runner",
                    .type = T::Choice,
                    .help = "generate (text) or pooling (embeddings, classification, scores: prefill only, no "
                            "sampler); auto: pooling for a Sentence-Transformers layout or a "
                            "*ForSequenceClassification checkpoint, else generate",
                    .flags = {"--runner"},
                    .keywords = {"runner"},
                    .choices = {"auto", "generate", "pooling"}}));
  t.push_back(bind(enum_field(&C::convert, convert_choice_name, parse_convert_choice),
                   {.name = "convert",
                    .type = T::Choice,
                    .help = "what a pooling runner makes of the model: embed (pooled hidden states) or classify (a "
                            "classification head: score.weight, or --hf-overrides classifier_from_token); auto: "
                            "classify for *ForSequenceClassification or classifier_from_token, else embed",
                    .flags = {"--convert"},
                    .keywords = {"convert"},
                    .choices = {"auto", "none", "embed", "classify"}}));
  t.push_back(bind(task_field(), {.name = "task",
                                  .type = T::Choice,
                                  .help = "vLLM's older spelling of --runner/--convert: generate, embed (embedding), "
                                          "classify (score)",
                                  .flags = {"--task"},
                                  .keywords = {"task"},
                                  .choices = {"auto", "generate", "embedding", "score", "embed", "classify"}}));
  t.push_back(bind(json_field(&C::pooler_config),
                   {.name = "pooler_config",
                    .type = T::Text,
                    .help = "vLLM's PoolerConfig JSON: pooling_type (LAST, MEAN, CLS), normalize, activation; unset: "
                            "the model's (1_Pooling/config.json and modules.json), else LAST and normalized",
                    .flags = {"--pooler-config", "--override-pooler-config"},
                    .keywords = {"pooler_config", "override_pooler_config"},
                    .shown_default = "the model's"}));
  t.push_back(bind(json_field(&C::hf_overrides),
                   {.name = "hf_overrides",
                    .type = T::Text,
                    .help = "config.json overrides for pooling (JSON): architectures, classifier_from_token (a "
                            "score head from these tokens' LM-head rows), is_original_qwen3_reranker (Qwen3-Reranker "
                            "as vLLM converts it), method; other keys refused",
                    .flags = {"--hf-overrides"},
                    .keywords = {"hf_overrides"},
                    .shown_default = "none"}));
  t.push_back(bind(bool_field(&C::profile_ops),
                   {.name = "profile_ops",
                    .type = T::Bool,
                    .help = "time every op (implies eager; bench's --profile-prefill / --profile-decode set it)",
                    .travels = true}));
  return t;
}

}  // namespace

const std::vector<Setting>& engine_settings() {
  static const std::vector<Setting> table = make_settings();
  return table;
}

}  // namespace nanovllm
