// `nanovllm generate`: offline generation for prompts given as flags or a JSONL file.
// JSONL lines: {"prompt": "..."} | {"prompt_token_ids": [...]} | {"messages": [...]} (chat),
// each optionally with sampling fields (temperature, top_p, top_k, min_p, seed, max_tokens,
// ignore_eos, stop, stop_token_ids) and structured-output fields as the server takes them
// (response_format, structured_outputs, guided_json / guided_regex / guided_choice / guided_grammar;
// config/structured_request.h). --json prints one object per request, in input order.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/config/generation_defaults.h"
#include "nanovllm/config/request_json.h"
#include "nanovllm/config/structured_request.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/frontend/tensor_parallel_start.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/log.h"
#include "vllm_flags.h"

namespace nanovllm::cli {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::vector<std::string> prompts;
  std::string input;
  bool chat = false;
  bool enable_thinking = false, no_thinking = false;  // neither: the template's default
  std::string chat_template;                          // --chat-template FILE_OR_STRING
  SamplingParams sp;
  std::vector<std::string> stop;        // --stop, into sp.stop once unescaped
  std::vector<int32_t> stop_token_ids;  // --stop-token-ids, into sp.stop_token_ids
  std::string generation_config = "auto", override_generation_config;
  bool json = false;
  bool no_progress = false;
  const CLI::App* cmd = nullptr;  // to tell which sampling flags were given
};

// The generation config's defaults under the sampling flags the command line leaves unset, as
// vLLM's LLM.generate takes them; JSONL lines' own fields win over both.
void apply_generation_defaults(GenerateArgs& a, const std::string& model) {
  const GenerationDefaults d = load_generation_defaults(a.generation_config, model, a.override_generation_config);
  if (d.empty()) return;
  const SamplingParams base = d.params();
  auto unset = [&](const char* flag) { return a.cmd->count(flag) == 0; };
  if (unset("--temperature")) a.sp.temperature = base.temperature;
  if (unset("--top-k")) a.sp.top_k = base.top_k;
  if (unset("--top-p")) a.sp.top_p = base.top_p;
  if (unset("--min-p")) a.sp.min_p = base.min_p;
  if (unset("--max-tokens") && d.max_tokens) a.sp.max_tokens = int(*d.max_tokens);
  a.sp.repetition_penalty = base.repetition_penalty;  // no flag of its own: JSONL lines may set it
  Logger().info(d.log_line());
}

// Renders chat messages before the model loads (a template error costs no loading time): the
// tokenizer's template, or --chat-template's.
class ChatRenderer {
 public:
  ChatRenderer(const EngineConfig& cfg, const GenerateArgs& a) : a_(a) {
    const std::string dir = find_tokenizer_dir(cfg, a.engine.tokenizer);
    if (dir.empty())
      throw UserError("--chat needs a tokenizer: no tokenizer.json for '" + cfg.model + "' (pass --tokenizer DIR)");
    tok_ = Tokenizer::from_dir(dir);
    const std::string source =
        a.chat_template.empty() ? tok_->chat_template() : read_chat_template_flag(a.chat_template);
    if (!source.empty()) tmpl_ = std::make_unique<ChatTemplate>(source);
    dir_ = dir;
  }

  std::string render(const nlohmann::ordered_json& messages) const {
    if (!tmpl_) throw UserError(dir_ + ": the tokenizer has no chat template (pass --chat-template)");
    ChatTemplateInputs in;
    in.messages = messages;
    in.add_generation_prompt = true;
    if (a_.enable_thinking) in.enable_thinking = true;
    if (a_.no_thinking) in.enable_thinking = false;
    in.bos_token = tok_->bos_token();
    in.eos_token = tok_->eos_token();
    return tmpl_->render(in);
  }

 private:
  const GenerateArgs& a_;
  std::string dir_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<ChatTemplate> tmpl_;
};

// --stop values as many CLIs take them: \n, \t and \\ stand for a newline, a tab and a backslash.
std::string unescaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct Request {
  Prompt prompt;
  SamplingParams sp;
};

// `chat` is needed (non-null) for --chat and for JSONL lines with "messages". `structured`: the
// engine's structured-output defaults (--structured-outputs-config).
std::vector<Request> read_requests(const ChatRenderer* chat, const GenerateArgs& a,
                                   const StructuredOutputsConfig& structured) {
  auto render = [&](const nlohmann::ordered_json& messages) {
    if (!chat) throw UserError("chat messages need a tokenizer with a chat template");
    return Prompt::of_text(chat->render(messages), false);  // the template wrote its specials
  };
  std::vector<Request> reqs;
  for (auto& p : a.prompts) {
    if (a.chat)
      reqs.push_back({render(nlohmann::ordered_json::array({{{"role", "user"}, {"content", p}}})), a.sp});
    else
      reqs.push_back({Prompt::of_text(p), a.sp});
  }
  if (a.input.empty()) return reqs;
  std::ifstream file;
  if (a.input != "-") {
    file.open(a.input);
    if (!file) throw UserError("--input " + a.input + ": cannot open file");
  }
  std::istream& in = a.input == "-" ? std::cin : file;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = a.input + ":" + std::to_string(n) + ": ";
    try {
      const auto j = parse_request_json<nlohmann::ordered_json>(line);  // ordered: chat templates render key order
      if (!j.is_object()) throw UserError(where + "each line must be a JSON object");
      Request r{{}, a.sp};
      read_sampling_fields(j, r.sp);
      r.sp.structured_outputs = read_structured_fields(j, structured).spec;
      if (j.contains("prompt_token_ids")) {
        if (!j["prompt_token_ids"].is_array()) throw UserError(where + "'prompt_token_ids' must be a list of integers");
        for (auto& t : j["prompt_token_ids"]) {
          const int64_t id = request_integer(t, "prompt_token_ids");
          if (id < 0 || id > std::numeric_limits<int32_t>::max())
            throw UserError(where + "prompt_token_ids: token id " + std::to_string(id) + " is out of range");
          r.prompt.token_ids.push_back(int32_t(id));
        }
        if (r.prompt.token_ids.empty()) throw UserError(where + "the prompt is empty");
      } else if (j.contains("prompt")) {
        if (!j["prompt"].is_string()) throw UserError(where + "'prompt' must be a string");
        r.prompt.text = j["prompt"].get<std::string>();
        if (r.prompt.text.empty()) throw UserError(where + "the prompt is empty");
      } else if (j.contains("messages")) {
        r.prompt = render(j["messages"]);
      } else {
        throw UserError(where + "needs 'prompt', 'prompt_token_ids' or 'messages'");
      }
      reqs.push_back(std::move(r));
    } catch (const nlohmann::json::exception& e) {
      throw UserError(where + "invalid JSON: " + e.what());
    } catch (const InvalidRequest& e) {
      throw UserError(where + e.what());
    } catch (const TokenizerError& e) {
      throw UserError(where + "chat template: " + e.what());
    }
  }
  return reqs;
}

void run(GenerateArgs& a) {
  for (auto& s : a.stop) s = unescaped(s);
  a.sp.stop = a.stop;
  a.sp.stop_token_ids = a.stop_token_ids;
  if (a.enable_thinking && a.no_thinking) throw UserError("--enable-thinking and --no-thinking contradict each other");
  EngineConfig cfg = a.engine.resolve();
  if (cfg.tp_rank == 0) apply_generation_defaults(a, cfg.model_path());
  a.sp.validate();
  if (cfg.tp_rank == 0 && a.prompts.empty() && a.input.empty())
    throw UserError("nothing to generate: give --prompt TEXT or --input FILE.jsonl (- for standard input)");
  // Rank 0 reads and checks every request (and renders chat messages) before any model loads.
  std::vector<Request> reqs;
  if (cfg.tp_rank == 0) {
    std::unique_ptr<ChatRenderer> chat;
    const bool wants_chat = a.chat || !a.input.empty();  // a JSONL file may hold "messages"
    if (wants_chat && (a.chat || !find_tokenizer_dir(cfg, a.engine.tokenizer).empty()))
      chat = std::make_unique<ChatRenderer>(cfg, a);
    reqs = read_requests(chat.get(), a, cfg.structured_outputs_config);
  }
  TpStart tp = start_tensor_parallel(cfg, a.engine.starts_other_ranks());
  if (tp.worker) return run_worker(cfg, a.engine.spawned());
  print_kernel_options(cfg);
  LLM llm(cfg, a.engine.tokenizer);
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (auto& r : reqs) {
    prompts.push_back(r.prompt);
    params.push_back(r.sp);
  }
  auto outs = llm.generate(prompts, params, !a.no_progress);  // on stderr, and only on a terminal
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i];
    if (a.json) {
      nlohmann::json j = {{"index", i},
                          {"prompt_token_ids", o.prompt_token_ids},
                          {"token_ids", o.token_ids},
                          {"text", o.text},
                          {"finish_reason", finish_reason_str(o.finish_reason)}};
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << "--- request " << i << " (" << o.token_ids.size() << " tokens, "
                << finish_reason_str(o.finish_reason) << ")\n";
      if (llm.tokenizer()) {
        std::cout << (prompts[i].text.empty() ? "" : prompts[i].text) << o.text << "\n";
      } else {
        for (auto t : o.token_ids) std::cout << t << " ";
        std::cout << "\n";
      }
    }
  }
}

}  // namespace

void add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "generate text for prompts");
  a->engine.add_to(*cmd);
  // Vector options take one value per occurrence (repeat the flag), so a MODEL after them stays the model.
  cmd->add_option("--prompt,-p", a->prompts, "a prompt (repeatable)")->allow_extra_args(false);
  cmd->add_option("--input,-i", a->input,
                  "JSONL file of requests, or - for standard input: one object a line with prompt, "
                  "prompt_token_ids or messages, sampling fields, and structured outputs as the server takes them "
                  "(response_format, structured_outputs, guided_json, guided_regex, guided_choice, guided_grammar)");
  cmd->add_flag("--chat", a->chat, "send each --prompt as a user message through the chat template");
  cmd->add_flag("--enable-thinking", a->enable_thinking, "chat: enable_thinking=true (default: the template's)");
  cmd->add_flag("--no-thinking", a->no_thinking, "chat: enable_thinking=false (default: the template's)");
  cmd->add_option("--chat-template", a->chat_template, "a chat template file, or the template itself (Jinja)");
  cmd->add_option("--temperature", a->sp.temperature, "0 = greedy");
  cmd->add_option("--top-k", a->sp.top_k, "0 or -1 = off");
  cmd->add_option("--top-p", a->sp.top_p, "nucleus sampling mass, (0, 1]");
  cmd->add_option("--min-p", a->sp.min_p, "drop tokens below min_p x the top probability");
  cmd->add_option("--max-tokens", a->sp.max_tokens, "tokens to generate per request");
  cmd->add_flag("--ignore-eos", a->sp.ignore_eos, "keep generating past EOS");
  cmd->add_option("--stop", a->stop, "stop string (repeatable); \\n, \\t and \\\\ are a newline, a tab, a backslash")
      ->allow_extra_args(false);
  cmd->add_option("--stop-token-ids", a->stop_token_ids, "stop token ids, comma-separated or repeated")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--generation-config", a->generation_config,
                  "auto (the model's generation_config.json gives the defaults of unset sampling flags), vllm (ignore "
                  "it) or a directory holding one");
  cmd->add_option("--override-generation-config", a->override_generation_config,
                  "JSON merged over the generation config, e.g. '{\"temperature\": 0.5}'");
  cmd->add_flag("--json", a->json, "one JSON object per request");
  cmd->add_flag("--no-progress", a->no_progress, "no progress line (shown on stderr when it is a terminal)");
  a->cmd = cmd;
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
