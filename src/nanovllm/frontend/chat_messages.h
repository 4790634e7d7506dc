// Chat messages as OpenAI clients send them -> what a chat template renders (the server's
// /v1/chat/completions and the Python LLM.chat / get_tokenizer().apply_chat_template share it):
// content given as text parts is joined with newlines (as vLLM), a missing or null content becomes
// "" (a tool-call turn), tool-call arguments given as JSON text are parsed into objects (templates
// iterate them), key order is kept; chat_template_kwargs set enable_thinking and the template's
// other variables. Bad input throws InvalidRequest naming the message and field
// ("messages[1].content").
#pragma once
#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/chat_template.h"

namespace nanovllm {

// `messages` must be a non-empty list of {"role": str, "content": str | [text parts] | null, ...}.
nlohmann::ordered_json chat_template_messages(const nlohmann::ordered_json& messages);

// One message's tool_calls (if any): checked, arguments given as JSON text parsed. `where` names it
// in errors ("messages[1]").
void prepare_tool_calls(nlohmann::ordered_json& message, const std::string& where);

// chat_template_kwargs (an object) into `in`: enable_thinking (a bool) and the other variables.
void apply_chat_template_kwargs(const nlohmann::ordered_json& kwargs, ChatTemplateInputs& in);

}  // namespace nanovllm
