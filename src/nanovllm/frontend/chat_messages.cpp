#include "nanovllm/frontend/chat_messages.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

using ojson = nlohmann::ordered_json;

namespace {

const ojson* field(const ojson& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& param, const std::string& want) {
  throw InvalidRequest(param, "'" + param + "' must be " + want);
}

}  // namespace

void prepare_tool_calls(ojson& message, const std::string& where) {
  auto it = message.find("tool_calls");
  if (it == message.end() || it->is_null()) return;
  if (!it->is_array()) throw InvalidRequest(where + ".tool_calls", where + ".tool_calls must be a list");
  for (size_t j = 0; j < it->size(); ++j) {
    ojson& call = (*it)[j];
    const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      throw InvalidRequest(at,
                           at + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    ojson& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      throw InvalidRequest(at + ".function.name", at + ".function needs a string 'name'");
    auto args = fn.find("arguments");
    if (args == fn.end() || !args->is_string()) continue;  // already an object: kept as given
    try {
      *args = parse_request_json<ojson>(args->get<std::string>());
    } catch (const InvalidRequest& e) {
      throw InvalidRequest(at + ".function.arguments", at + ".function.arguments is not valid JSON: " + e.what());
    }
  }
}

ojson chat_template_messages(const ojson& msgs) {
  if (!msgs.is_array() || msgs.empty()) wrong_type("messages", "a non-empty list of messages");
  ojson out = ojson::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    ojson msg = msgs[i];
    if (!msg.is_object()) wrong_type(where, "an object");
    if (!msg.contains("role") || !msg["role"].is_string())
      throw InvalidRequest(where + ".role", where + " needs a string 'role'");
    ojson& c = msg["content"];
    if (c.is_array()) {  // [{"type": "text", "text": ...}] -> one string, as vLLM joins them
      std::string text;
      for (auto& part : c) {
        const ojson* type = part.is_object() ? field(part, "type") : nullptr;
        const ojson* part_text = part.is_object() ? field(part, "text") : nullptr;
        if (!type || !type->is_string() || *type != "text" || !part_text || !part_text->is_string())
          throw InvalidRequest(where + ".content",
                               where + ".content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
        if (!text.empty()) text += "\n";
        text += part_text->get<std::string>();
      }
      c = text;
    } else if (c.is_null()) {  // vLLM gives templates "" for a missing or null content (a tool-call turn)
      c = "";
    } else if (!c.is_string()) {
      wrong_type(where + ".content", "a string, a list of text parts or null");
    }
    prepare_tool_calls(msg, where);
    out.push_back(std::move(msg));
  }
  return out;
}

void apply_chat_template_kwargs(const ojson& kwargs, ChatTemplateInputs& in) {
  if (!kwargs.is_object()) wrong_type("chat_template_kwargs", "an object");
  for (auto& [k, v] : kwargs.items()) {
    if (k == "enable_thinking") {
      if (!v.is_boolean()) wrong_type("chat_template_kwargs.enable_thinking", "a boolean");
      in.enable_thinking = v.get<bool>();
    } else {
      in.extra[k] = v;
    }
  }
}

}  // namespace nanovllm
