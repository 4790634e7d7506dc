#include "nanovllm/frontend/llm.h"

#include <filesystem>
#include <future>
#include <map>

#include "nanovllm/config/hf_hub.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/progress.h"

namespace nanovllm {
namespace fs = std::filesystem;

namespace {

// The running executable's directory ("" when /proc is not there).
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

std::string preset_tokenizer_name(const std::string& model) {
  const auto preset = preset_model_config(model);
  if (!preset) return "";
  // Qwen2.5 has Qwen3's byte-level BPE and ids (Qwen3 adds a few special tokens); Qwen3-MoE is Qwen3's.
  if (preset->architecture == "Qwen3ForCausalLM" || preset->architecture == "Qwen3MoeForCausalLM" ||
      preset->architecture == "Qwen2ForCausalLM")
    return "qwen3";
  if (preset->architecture == "LlamaForCausalLM") return "llama3";
  return "";
}

std::vector<std::string> preset_tokenizer_dirs(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("NANOVLLM_TOKENIZER_DIR")) dirs.emplace_back(env);
  const fs::path exe = executable_dir();
  if (!exe.empty() && !name.empty()) {
    dirs.push_back((exe / "share/nanovllm/tokenizers" / name).string());     // the build tree
    dirs.push_back((exe / "../share/nanovllm/tokenizers" / name).string());  // an installed prefix
  }
  return dirs;
}

std::string find_tokenizer_dir(const EngineConfig& cfg, const std::string& explicit_dir) {
  // vLLM: the tokenizer's revision is --tokenizer-revision, else the model's.
  const std::string revision = cfg.tokenizer_revision.empty() ? cfg.revision : cfg.tokenizer_revision;
  if (!explicit_dir.empty()) {
    const std::string dir = resolve_local_dir(explicit_dir, revision, cfg.download_dir, "--tokenizer");
    if (!fs::exists(fs::path(dir) / "tokenizer.json"))
      throw UserError("--tokenizer " + explicit_dir + ": no tokenizer.json there" +
                      (dir == explicit_dir ? "" : " (" + dir + ")"));
    return dir;
  }
  std::string dir = local_model_dir(cfg);  // "" for a preset
  const bool is_id = !dir.empty() && dir != cfg.model;
  if (is_id && revision != cfg.revision) dir = resolve_local_dir(cfg.model, revision, cfg.download_dir, "model");
  if (!dir.empty() && fs::exists(fs::path(dir) / "tokenizer.json")) return dir;
  if (preset_model_config(cfg.model))
    for (auto& d : preset_tokenizer_dirs(preset_tokenizer_name(cfg.model)))
      if (fs::exists(fs::path(d) / "tokenizer.json")) return d;
  return "";
}

LLM::LLM(EngineConfig cfg, const std::string& tokenizer_dir, bool skip_tokenizer_init) {
  settle_model_dir(cfg);  // a Hugging Face id -> its cached snapshot, once; cfg.model stays the name shown
  const std::string tdir = skip_tokenizer_init ? "" : find_tokenizer_dir(cfg, tokenizer_dir);
  // The tokenizer (parsing tokenizer.json: ~0.5 s for Qwen3's, one core) loads on its own thread
  // while the engine loads or generates the weights; its errors come out of get().
  std::future<std::unique_ptr<Tokenizer>> tokenizer;
  if (!tdir.empty()) tokenizer = std::async(std::launch::async, [tdir] { return Tokenizer::from_dir(tdir); });
  if (!cfg.hf_overrides.classifier_from_token.empty() && cfg.classifier_token_ids.empty()) {
    // The score head is built from these tokens' LM-head rows: their ids first (the engine has no tokenizer).
    if (tdir.empty()) throw UserError("--hf-overrides classifier_from_token needs the model's tokenizer");
    tokenizer_ = tokenizer.get();
    cfg.classifier_token_ids = classifier_token_ids(*tokenizer_, cfg.hf_overrides.classifier_from_token);
  }
  engine_ = std::make_unique<LLMEngine>(std::move(cfg));
  if (!tdir.empty()) {
    if (!tokenizer_) tokenizer_ = tokenizer.get();
    engine_->enable_structured_outputs(tokenizer_.get());
    if (!tokenizer_->chat_template().empty())
      chat_template_ = std::make_unique<ChatTemplate>(tokenizer_->chat_template());
  }
  tracker_ = std::make_unique<RequestTracker>(*engine_, tokenizer_.get());
}

EngineInfo LLM::engine_info() const {
  ModelRunner& runner = engine_->model_runner();
  EngineInfo i;
  i.backend = runner.backend().name();
  i.device = runner.backend().device();
  i.act_dtype = runner.backend().act_dtype();
  i.kv_cache_dtype = runner.kv_cache_dtype();
  i.num_kv_blocks = engine_->block_manager().num_blocks();
  i.uses_cuda_graphs = runner.uses_cuda_graphs();
  i.num_cuda_graphs = runner.num_cuda_graphs();
  i.async_scheduling = engine_->async_scheduling();
  return i;
}

const Tokenizer& LLM::require_tokenizer() const {
  if (!tokenizer_)
    throw UserError("the model has no tokenizer (tokenizer.json); give prompts as token ids or pass --tokenizer DIR");
  return *tokenizer_;
}

std::vector<int32_t> LLM::to_token_ids(const Prompt& p) const {
  if (!p.token_ids.empty()) return p.token_ids;
  if (p.text.empty()) throw InvalidRequest("prompt", "the prompt is empty");
  return require_tokenizer().encode(p.text, p.add_special_tokens);
}

std::string LLM::apply_chat_template(const ChatTemplateInputs& in, const ChatTemplate* own, size_t max_output) const {
  const Tokenizer& tok = require_tokenizer();
  if (!own && !chat_template_)
    throw UserError("the tokenizer has no chat template (tokenizer_config.json, chat_template.jinja)");
  ChatTemplateInputs x = in;
  if (x.bos_token.empty()) x.bos_token = tok.bos_token();
  if (x.eos_token.empty()) x.eos_token = tok.eos_token();
  return (own ? *own : *chat_template_).render(x, max_output);
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                         bool progress, const std::function<void()>& after_step) {
  if (params.size() != 1 && params.size() != prompts.size())
    throw UserError("generate: " + std::to_string(params.size()) + " sampling params for " +
                    std::to_string(prompts.size()) + " prompts");
  auto params_of = [&](size_t i) -> const SamplingParams& { return params[params.size() == 1 ? 0 : i]; };
  // Tokenize and validate everything first: a bad request fails before any work starts.
  std::vector<Prompt> checked;
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      checked.push_back(Prompt::of_ids(to_token_ids(prompts[i])));
      check_params(params_of(i));
    } catch (const InvalidRequest& e) {
      throw InvalidRequest(e.param, "request " + std::to_string(i) + ": " + e.what());
    }
  }
  // This call's unfinished requests -> the index of their first output; a request of n samples
  // has n outputs in a row, in choice order.
  std::map<int64_t, size_t> mine;
  size_t num_outputs = 0;
  for (size_t i = 0; i < prompts.size(); ++i) num_outputs += size_t(params_of(i).n);
  std::vector<RequestOutput> outs(num_outputs);
  std::map<int64_t, int> left;  // choices still running per request
  try {
    size_t first = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const SamplingParams& sp = params_of(i);
      try {
        const int64_t id = add_request(checked[i], sp);
        mine.emplace(id, first);
        left.emplace(id, sp.n);
      } catch (const InvalidRequest& e) {
        throw InvalidRequest(e.param, "request " + std::to_string(i) + ": " + e.what());
      }
      first += size_t(sp.n);
    }
    ProgressBar bar(int64_t(prompts.size()), progress);
    while (!left.empty()) {
      StepResult r;
      std::vector<RequestOutput> done = step(&r);
      bar.on_step(r.is_prefill, r.num_tokens, r.seconds);
      for (RequestOutput& o : done) {
        auto it = mine.find(o.request_id);
        if (it == mine.end()) continue;  // queued by add_request outside this call
        outs[it->second + size_t(o.index)] = std::move(o);
        if (--left.at(it->first) == 0) {
          left.erase(it->first);
          bar.on_finished();
        }
      }
      if (after_step) after_step();
    }
    bar.done();
  } catch (...) {
    for (auto& [id, _] : left) abort_request(id);
    throw;
  }
  return outs;
}

void LLM::check_params(const SamplingParams& params) const {
  params.validate();
  if (!params.stop.empty() || !params.bad_words.empty()) require_tokenizer();  // text is needed for these
}

int64_t LLM::add_request(const Prompt& prompt, const SamplingParams& params, bool stream) {
  std::vector<int32_t> ids = to_token_ids(prompt);
  check_params(params);
  RequestTracker::Options opts;
  opts.stream = stream;  // false: the text once at the end (token by token only where stop strings need it)
  return tracker_->add(std::move(ids), params, opts);
}

std::vector<RequestOutput> LLM::step(StepResult* stats) {
  TrackerStep s = tracker_->step();
  std::vector<RequestOutput> finished;
  for (RequestEvent& ev : s.events) {
    if (!ev.error.empty()) throw Error("request " + std::to_string(ev.request_id) + ": " + ev.error);
    if (ev.finish != FinishReason::None) finished.push_back(std::move(ev.output));
  }
  if (stats) *stats = std::move(s.engine);
  return finished;
}

}  // namespace nanovllm
