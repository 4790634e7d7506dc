// `nanovllm tokenize`: a debugging tool for the tokenizer and chat template (no weights loaded).
// Input lines: {"text": "..."} -> {"ids": [...]} (no special tokens added), or
// {"messages": [...], "tools": [...], "add_generation_prompt": true, "enable_thinking": false}
// -> {"text": "<rendered prompt>", "ids": [...]}.
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine_flags.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cli {
namespace {

struct TokenizeArgs {
  std::string model_arg, model, tokenizer, input;
};

void run(TokenizeArgs& a) {
  a.model = chosen_model(a.model_arg, a.model);
  EngineConfig cfg;
  cfg.model = a.model;
  const std::string dir = find_tokenizer_dir(cfg, a.tokenizer);
  if (dir.empty()) throw UserError("no tokenizer.json for '" + a.model + "' (pass --tokenizer DIR)");
  auto tok = Tokenizer::from_dir(dir);
  std::unique_ptr<ChatTemplate> tmpl;
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
    nlohmann::ordered_json j;  // key order matters: tool schemas render in the order given
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(where + "invalid JSON: " + e.what());
    }
    nlohmann::ordered_json out;
    try {
      if (j.contains("text") && j["text"].is_string()) {
        out["ids"] = tok->encode(j["text"].get<std::string>());
      } else if (j.contains("messages")) {
        if (!tmpl) {
          if (tok->chat_template().empty())
            throw UserError(dir + ": no chat_template in tokenizer_config.json or chat_template.jinja");
          tmpl = std::make_unique<ChatTemplate>(tok->chat_template());
        }
        ChatTemplateInputs ci;
        ci.messages = j["messages"];
        if (j.contains("tools")) ci.tools = j["tools"];
        if (j.contains("add_generation_prompt")) ci.add_generation_prompt = j["add_generation_prompt"].get<bool>();
        if (j.contains("enable_thinking")) ci.enable_thinking = j["enable_thinking"].get<bool>();
        ci.bos_token = tok->bos_token();
        ci.eos_token = tok->eos_token();
        const std::string text = tmpl->render(ci);
        out["text"] = text;
        out["ids"] = tok->encode(text);
      } else {
        throw UserError(where + "needs a string 'text' or 'messages'");
      }
    } catch (const nlohmann::json::exception& e) {
      throw UserError(where + e.what());
    } catch (const TokenizerError& e) {
      throw UserError(where + e.what());
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "encode text or render chat messages (debugging)");
  cmd->add_option("MODEL", a->model_arg, "model directory or preset");
  cmd->add_option("--model,-m", a->model, "the model, as MODEL");
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer directory");
  cmd->add_option("--input,-i", a->input, "JSONL file, or - for stdin")->required();
  cmd->callback([a] { run(*a); });
}

}  // namespace nanovllm::cli
