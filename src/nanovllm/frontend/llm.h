// The public C++ API (nano-vllm's LLM): load a model, generate for a batch of prompts.
//
//   nanovllm::EngineConfig cfg;  cfg.model = "/path/to/Qwen3-0.6B";
//   nanovllm::LLM llm(cfg);
//   auto outs = llm.generate({nanovllm::Prompt::of_text("Hello")}, {nanovllm::SamplingParams{}});
//   std::cout << outs[0].text;
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/config/sampling_params.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/frontend/request_tracker.h"
#include "nanovllm/tokenizer/chat_template.h"
#include "nanovllm/tokenizer/tokenizer.h"

namespace nanovllm {

struct Prompt {
  std::string text;  // used when token_ids is empty
  std::vector<int32_t> token_ids;
  // Text prompts: add the tokenizer's special tokens (its post-processor's BOS for Llama and
  // Mistral; none for Qwen), as vLLM and Hugging Face do; false for text a chat template rendered.
  bool add_special_tokens = true;
  static Prompt of_text(std::string t, bool add_special_tokens = true) {
    return {std::move(t), {}, add_special_tokens};
  }
  static Prompt of_ids(std::vector<int32_t> ids) { return {"", std::move(ids), false}; }
};

// Where the tokenizer of cfg.model lives: `explicit_dir` (a directory, or a Hugging Face id in the
// local cache at cfg.tokenizer_revision, else cfg.revision), else the model's directory (an id's
// snapshot at that revision) when it has tokenizer.json, else (a built-in preset) the first of
// preset_tokenizer_dirs(its tokenizer) that has one. Empty when there is none.
std::string find_tokenizer_dir(const EngineConfig& cfg, const std::string& explicit_dir);
// The tokenizer bundled for a preset: "qwen3" (the Qwen3 and Qwen2.5 presets), "llama3" (Llama
// 3.x); "" for Mistral (none bundled) and for anything not a preset.
std::string preset_tokenizer_name(const std::string& model);
// Where a preset's tokenizer `name` is looked for: $NANOVLLM_TOKENIZER_DIR, then
// share/nanovllm/tokenizers/<name> beside the executable (the build tree: CMake copies it there
// from the npm data of scripts/setup.sh) and under its prefix (`cmake --install`).
std::vector<std::string> preset_tokenizer_dirs(const std::string& name = "qwen3");

// hf_overrides' classifier_from_token as ids (the tokenizer's convert_tokens_to_ids, as vLLM);
// throws UserError naming a token the vocabulary lacks.
std::vector<int32_t> classifier_token_ids(const Tokenizer& tok, const std::vector<std::string>& tokens);

// What the engine settled at start-up, for start-up logs, /metrics and benchmark reports.
struct EngineInfo {
  std::string backend;  // the backend's name ("cpu", "cuda (NVIDIA H100 ...)")
  Device device = Device::CPU;
  DType act_dtype = DType::F32;
  DType kv_cache_dtype = DType::F32;  // as stored (--kv-cache-dtype)
  int64_t num_kv_blocks = 0;
  int64_t num_cuda_graphs = 0;  // decode graphs captured
  bool uses_cuda_graphs = false;
  bool async_scheduling = false;  // as settled for the backend
};

class LLM {
 public:
  // `tokenizer_dir` empty: find_tokenizer_dir's choice. `skip_tokenizer_init`: load none (token
  // ids in and out only, as vLLM's --skip-tokenizer-init).
  explicit LLM(EngineConfig cfg, const std::string& tokenizer_dir = "", bool skip_tokenizer_init = false);

  // The outputs of each prompt in order: one, or n in a row (choices 0..n-1) for a request of n
  // parallel samples. params has one entry (for all) or one per prompt.
  // Throws InvalidRequest (with the prompt index in the message) before running anything if
  // any request is invalid. `after_step` (optional) runs after every engine step and may throw
  // (the Python binding's Ctrl-C check): the call's unfinished requests are then aborted.
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                      bool progress = false, const std::function<void()>& after_step = {});

  // Pooling models (--runner pooling or detected; models/pooling_model.h): one output per prompt,
  // its RequestOutput::pooled the embedding (task embed) or class scores (classify, score).
  // Throws InvalidRequest (vLLM's messages) for a generative model or options the model refuses.
  std::vector<RequestOutput> encode(const std::vector<Prompt>& prompts, const PoolingParams& params,
                                    bool progress = false, const std::function<void()>& after_step = {});
  // vLLM's LLM.score: the relevance of each document to the query (queries: one for all, or one per
  // document). A classification model (cross-encoder, Qwen3-Reranker) scores the pair's tokens
  // joined, query then document (a decoder-only pair as vLLM joins it); an embedding model gives
  // the cosine similarity of their embeddings. activation: the classifier's (unset: the model's).
  std::vector<double> score(const std::vector<Prompt>& queries, const std::vector<Prompt>& documents,
                            std::optional<bool> activation = std::nullopt,
                            const std::function<void()>& after_step = {});
  // Set for a pooling model.
  const std::optional<PoolingModel>& pooling_model() const { return engine_->pooling_model(); }

  // nano-vllm's LLMEngine loop with text: queue a request (tokenized and validated; throws
  // InvalidRequest; its n choices share the returned id), then step() while has_unfinished().
  // step() returns the choices that finished in it (text, token ids, finish reason, index, and
  // logprobs when asked); `stats` gets the engine's StepResult. `stream`: the request's every token
  // is an event of tracker().step() instead (the Python AsyncLLM's loop).
  int64_t add_request(const Prompt& prompt, const SamplingParams& params, bool stream = false);
  std::vector<RequestOutput> step(StepResult* stats = nullptr);
  bool has_unfinished() const { return tracker_->has_unfinished(); }
  void abort_request(int64_t id) { tracker_->abort(id); }

  // The live requests, for a front end with its own loop (the server's: streaming, n > 1).
  RequestTracker& tracker() { return *tracker_; }

  // The resolved settings (max_model_len settled), the model's, and what the engine settled.
  const EngineConfig& config() const { return engine_->config(); }
  const ModelConfig& model_config() const { return engine_->model_config(); }
  EngineInfo engine_info() const;
  SchedulerStats scheduler_stats() const { return engine_->scheduler_stats(); }

  // Chat messages -> prompt text through the model's chat template, or `own` (a request's
  // chat_template) when given; bos_token and eos_token are the tokenizer's unless set. A render
  // producing more than `max_output` bytes fails (TokenizerError naming the limit).
  std::string apply_chat_template(const ChatTemplateInputs& in, const ChatTemplate* own = nullptr,
                                  size_t max_output = kMaxChatTemplateOutput) const;
  // Replaces the tokenizer's chat template (--chat-template); throws TokenizerError on bad syntax.
  void set_chat_template(const std::string& source) { chat_template_ = std::make_unique<ChatTemplate>(source); }

  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // Compiles a request's structured outputs into the engine's grammar cache, so that admitting the
  // request later finds it compiled. Thread-safe: the server calls it off the engine thread. Throws
  // InvalidRequest as add_request would.
  void precompile_structured(const StructuredOutputs& so) { engine_->precompile_grammar(so); }
  const Tokenizer& require_tokenizer() const;  // throws UserError when there is none
  std::vector<int32_t> to_token_ids(const Prompt& p) const;

 private:
  // Validates `params`; stop strings and bad words need the tokenizer. Throws InvalidRequest / UserError.
  void check_params(const SamplingParams& params) const;

  std::unique_ptr<LLMEngine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::unique_ptr<RequestTracker> tracker_;  // over engine_ and tokenizer_
};

}  // namespace nanovllm
