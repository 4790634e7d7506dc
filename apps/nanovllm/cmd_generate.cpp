// `nanovllm generate`: offline generation for prompts given as flags or a JSONL file.
// JSONL lines: {"prompt": "..."} | {"prompt_token_ids": [...]} | {"messages": [...]} (chat),
// each optionally with sampling fields (temperature, top_p, top_k, min_p, seed, max_tokens,
// ignore_eos, stop, stop_token_ids). --json prints one object per request, in input order.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#include "nanovllm/request_json.h"
#include "nanovllm/utils/error.h"
#include "tensor_parallel_start.h"

namespace nanovllm::cli {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::vector<std::string> prompts;
  std::string input;
  bool chat = false;
  int thinking = -1;  // -1: template default
  SamplingParams sp;
  int64_t seed = -1;
  bool json = false;
  bool no_progress = false;
};

struct Request {
  Prompt prompt;
  SamplingParams sp;
};

Prompt chat_prompt(const LLM& llm, const nlohmann::ordered_json& messages, const GenerateArgs& a) {
  ChatTemplateInputs in;
  in.messages = messages;
  in.add_generation_prompt = true;
  if (a.thinking >= 0) in.enable_thinking = a.thinking == 1;
  return Prompt::of_text(llm.apply_chat_template(in));
}

std::vector<Request> read_requests(const LLM& llm, const GenerateArgs& a) {
  std::vector<Request> reqs;
  for (auto& p : a.prompts) {
    if (a.chat)
      reqs.push_back({chat_prompt(llm, nlohmann::ordered_json::array({{{"role", "user"}, {"content", p}}}), a), a.sp});
    else
      reqs.push_back({Prompt::of_text(p), a.sp});
  }
  if (a.input.empty()) return reqs;
  std::ifstream in(a.input);
  if (!in) throw UserError("--input " + a.input + ": cannot open file");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = a.input + ":" + std::to_string(n) + ": ";
    try {
      const auto j = parse_request_json<nlohmann::ordered_json>(line);  // ordered: chat templates render key order
      if (!j.is_object()) throw UserError(where + "each line must be a JSON object");
      Request r{{}, a.sp};
      read_sampling_fields(j, r.sp);
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
        r.prompt = chat_prompt(llm, j["messages"], a);
      } else {
        throw UserError(where + "needs 'prompt', 'prompt_token_ids' or 'messages'");
      }
      reqs.push_back(std::move(r));
    } catch (const nlohmann::json::exception& e) {
      throw UserError(where + "invalid JSON: " + e.what());
    } catch (const InvalidRequest& e) {
      throw UserError(where + e.what());
    }
  }
  return reqs;
}

void run(GenerateArgs& a) {
  if (a.seed >= 0) a.sp.seed = uint64_t(a.seed);
  a.sp.validate();
  EngineConfig cfg = a.engine.resolve();
  if (cfg.tp_rank == 0 && a.prompts.empty() && a.input.empty())
    throw UserError("nothing to generate: give --prompt TEXT or --input FILE.jsonl");
  TpStart tp = start_tensor_parallel(cfg, a.engine);
  if (tp.worker) return run_worker(cfg, a.engine.spawned());
  print_kernel_options(cfg);
  LLM llm(cfg, a.engine.tokenizer);
  auto reqs = read_requests(llm, a);
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (auto& r : reqs) {
    prompts.push_back(r.prompt);
    params.push_back(r.sp);
  }
  auto outs = llm.generate(prompts, params, !a.no_progress && !a.json);
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
  cmd->add_option("--prompt,-p", a->prompts, "a prompt (repeatable)");
  cmd->add_option("--input,-i", a->input, "JSONL file of requests");
  cmd->add_flag("--chat", a->chat, "send each --prompt as a user message through the chat template");
  cmd->add_flag("--enable-thinking{1},--no-thinking{0}", a->thinking,
                "chat: thinking on/off (template default otherwise)");
  cmd->add_option("--temperature", a->sp.temperature, "0 = greedy");
  cmd->add_option("--top-k", a->sp.top_k, "0 or -1 = off");
  cmd->add_option("--top-p", a->sp.top_p, "nucleus sampling mass, (0, 1]");
  cmd->add_option("--min-p", a->sp.min_p, "drop tokens below min_p x the top probability");
  cmd->add_option("--max-tokens", a->sp.max_tokens, "tokens to generate per request");
  cmd->add_flag("--ignore-eos", a->sp.ignore_eos, "keep generating past EOS");
  cmd->add_option("--seed", a->seed, "sampling seed (same seed, same output)");
  cmd->add_option("--stop", a->sp.stop, "stop string (repeatable)");
  cmd->add_option("--stop-token-ids", a->sp.stop_token_ids, "stop token ids");
  cmd->add_flag("--json", a->json, "one JSON object per request");
  cmd->add_flag("--no-progress", a->no_progress, "no progress bar");
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
