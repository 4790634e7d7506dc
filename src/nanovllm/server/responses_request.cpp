// Request side of responses_protocol.h: the Responses body's field audit, then its translation
// into a chat-completions body for parse_chat_request (the one generation path).
#include <cstdio>
#include <random>
#include <utility>

#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/server/request_field_errors.h"
#include "nanovllm/server/responses_protocol.h"

namespace nanovllm::server {

namespace {

using fields::bad;
using fields::field;
using fields::wrong_type;

// j[name] or null (nlohmann's value() with a json default can hand back a dangling reference).
ojson or_null(const ojson& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? ojson(nullptr) : *it;
}

// A string field with a default when absent; another type is a 400 naming `param`.
std::string word(const ojson& j, const char* name, const std::string& dflt, const std::string& param) {
  const ojson* v = field(j, name);
  if (!v) return dflt;
  if (!v->is_string()) wrong_type(param, "a string");
  return v->get<std::string>();
}

std::string text_of(const ojson& j, const char* name, const std::string& param) {
  const ojson* v = field(j, name);
  if (!v) bad(param, "'" + param + "' is required", "missing_field");
  if (!v->is_string()) wrong_type(param, "a string");
  return v->get<std::string>();
}

// When a field this server does not implement holds a value it can honour anyway.
using Accepts = bool (*)(const ojson&);
bool never(const ojson&) { return false; }
bool is_false(const ojson& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_zero(const ojson& v) { return v.is_number_integer() && v.get<int64_t>() == 0; }
bool empty_list(const ojson& v) { return v.is_array() && v.empty(); }
bool no_truncation(const ojson& v) { return v == "disabled"; }
bool standard_tier(const ojson& v) { return v == "auto" || v == "default"; }
bool no_obfuscation(const ojson& v) {
  return v.is_object() && v.size() == 1 && v.contains("include_obfuscation") && is_false(v["include_obfuscation"]);
}

struct FieldRule {
  const char* name;
  Accepts accepts;  // nullptr: implemented (read below or by the chat path)
  const char* why;  // for refused values: what is missing
};

// OpenAI's ResponseCreateParams and vLLM's additions, in OpenAI's order; the sampling extras
// (top_k ... stop) go to the chat path unchanged.
const FieldRule kFields[] = {
    {"background", is_false, "background responses are not supported (use stream to get output as it comes)"},
    {"context_management", never, "context_management is not supported"},
    {"conversation", never, "conversations are not supported (use previous_response_id)"},
    {"include", empty_list, nullptr},  // checked below, entry by entry
    {"input", nullptr, nullptr},
    {"instructions", nullptr, nullptr},
    {"max_output_tokens", nullptr, nullptr},
    {"max_tool_calls", never, "max_tool_calls is not supported"},
    {"metadata", nullptr, nullptr},
    {"model", nullptr, nullptr},
    {"moderation", never, "moderation is not supported"},
    {"parallel_tool_calls", nullptr, nullptr},  // accepted as vLLM does: the model decides
    {"previous_response_id", nullptr, nullptr},
    {"prompt", never, "prompt templates are not supported (send input and instructions)"},
    {"prompt_cache_key", nullptr, nullptr},  // a routing hint: prefix caching needs none
    {"prompt_cache_options", never, "prompt_cache_options is not supported (prefix caching is automatic)"},
    {"prompt_cache_retention", never, "prompt_cache_retention is not supported (prefix caching is automatic)"},
    {"reasoning", nullptr, nullptr},
    {"safety_identifier", nullptr, nullptr},  // recorded as user is: nothing acts on it
    {"service_tier", standard_tier, "service tiers other than auto and default are not supported"},
    {"store", nullptr, nullptr},
    {"stream", nullptr, nullptr},
    {"stream_options", no_obfuscation, "stream obfuscation is not supported: send include_obfuscation false"},
    {"temperature", nullptr, nullptr},
    {"text", nullptr, nullptr},
    {"tool_choice", nullptr, nullptr},
    {"tools", nullptr, nullptr},
    {"top_logprobs", is_zero, "logprobs are not supported on /v1/responses"},
    {"top_p", nullptr, nullptr},
    {"truncation", no_truncation, "truncation 'auto' is not supported: long inputs are refused instead"},
    {"user", nullptr, nullptr},
    // vLLM's extra fields
    {"request_id", nullptr, nullptr},
    {"priority", nullptr, nullptr},
    {"cache_salt", never, "cache_salt is not supported"},
    {"mm_processor_kwargs", never, "multimodal inputs are not supported"},
    {"enable_response_messages", is_false, "enable_response_messages is not supported"},
    {"previous_input_messages", never, "previous_input_messages is not supported (use previous_response_id)"},
    {"top_k", nullptr, nullptr},
    {"min_p", nullptr, nullptr},
    {"repetition_penalty", nullptr, nullptr},
    {"presence_penalty", nullptr, nullptr},
    {"frequency_penalty", nullptr, nullptr},
    {"seed", nullptr, nullptr},
    {"stop", nullptr, nullptr},
    {"stop_token_ids", nullptr, nullptr},
    {"logit_bias", nullptr, nullptr},
    {"ignore_eos", nullptr, nullptr},
    {"min_tokens", nullptr, nullptr},
};
constexpr const char* kSamplingExtras[] = {
    "request_id",       "priority",          "top_k",     "min_p", "repetition_penalty",
    "presence_penalty", "frequency_penalty", "seed",      "stop",  "stop_token_ids",
    "logit_bias",       "ignore_eos",        "min_tokens"};

// Chat fields in the chat path's errors -> the Responses fields they came from.
constexpr std::pair<const char*, const char*> kChatNames[] = {
    {"messages", "input"}, {"max_tokens", "max_output_tokens"}, {"response_format", "text.format"}};

void audit_fields(const ojson& body) {
  std::string unknown;
  for (auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const FieldRule& r : kFields)
      if (key == r.name) rule = &r;
    if (!rule) {
      if (!unknown.empty()) unknown += ", ";
      unknown += key;
      continue;
    }
    if (rule->accepts && !value.is_null() && !rule->accepts(value) && rule->why)
      throw ApiError(400, "'" + key + "' is not supported by this server: " + rule->why, key, "unsupported_parameter");
  }
  if (!unknown.empty())
    std::fprintf(stderr, "warning: the following fields were present in the request but ignored: %s\n",
                 unknown.c_str());
  if (const ojson* inc = field(body, "include")) {
    if (!inc->is_array()) wrong_type("include", "a list");
    for (auto& e : *inc)
      bad("include", "include " + e.dump() + " is not supported: this server produces no such output",
          "unsupported_parameter");
  }
}

// A message's content: a string, or input_text / output_text parts (joined with newlines, as
// vLLM joins text parts).
std::string message_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(where, "a string or a list of input_text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(at, "an object");
    const std::string type = word(part, "type", "", at + ".type");
    if (type != "input_text" && type != "output_text")
      bad(at + ".type", "content parts of type '" + type + "' are not supported (only input_text and output_text)",
          "unsupported_parameter");
    if (i) text += '\n';
    text += text_of(part, "text", at + ".text");
  }
  return text;
}

bool names_call(const ojson& messages, const std::string& call_id) {
  for (auto& m : messages)
    if (auto it = m.find("tool_calls"); it != m.end())
      for (auto& c : *it)
        if (c.contains("id") && c["id"] == call_id) return true;
  return false;
}

// Function tools in chat's shape; any other tool type is refused by name.
ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) wrong_type("tools", "a list of tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) wrong_type(at, "an object");
    const std::string type = word(t, "type", "", at + ".type");
    if (type != "function")
      bad(at + ".type",
          "tools of type '" + type + "' are not supported: this server runs no built-in tools (only type 'function')",
          "unsupported_parameter");
    ojson fn = {{"name", text_of(t, "name", at + ".name")}};
    if (const ojson* d = field(t, "description")) fn["description"] = *d;
    if (const ojson* p = field(t, "parameters")) fn["parameters"] = *p;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice: "none" / "auto" / "required" or {"type": "function", "name"} (chat's named form).
ojson chat_tool_choice(const ojson& tc) {
  if (tc.is_string()) return tc;  // the chat path checks the word
  if (!tc.is_object()) wrong_type("tool_choice", "a string or an object");
  const std::string type = word(tc, "type", "", "tool_choice.type");
  if (type != "function")
    bad("tool_choice", "tool_choice of type '" + type + "' is not supported (only 'function', or a string)",
        "unsupported_parameter");
  return {{"type", "function"}, {"function", {{"name", text_of(tc, "name", "tool_choice.name")}}}};
}

// text.format -> response_format (the structured-output path).
ojson response_format(const ojson& text) {
  if (!text.is_object()) wrong_type("text", "an object");
  if (const ojson* v = field(text, "verbosity"); v && *v != "medium")
    bad("text.verbosity", "text.verbosity other than 'medium' is not supported", "unsupported_parameter");
  const ojson* f = field(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) wrong_type("text.format", "an object");
  const std::string type = word(*f, "type", "", "text.format.type");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    bad("text.format.type", "text.format type '" + type + "' is not supported (text, json_schema, json_object)");
  ojson js = {{"name", text_of(*f, "name", "text.format.name")}};
  const ojson* schema = field(*f, "schema");
  if (!schema) bad("text.format.schema", "'text.format.schema' is required", "missing_field");
  js["schema"] = *schema;
  if (const ojson* s = field(*f, "strict")) js["strict"] = *s;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

void check_metadata(const ojson& md) {
  if (!md.is_object()) wrong_type("metadata", "an object of strings");
  if (md.size() > 16) bad("metadata", "metadata has " + std::to_string(md.size()) + " keys; at most 16 are allowed");
  for (auto& [k, v] : md.items()) {
    if (k.size() > 64) bad("metadata", "metadata keys are at most 64 characters");
    if (!v.is_string() || v.get_ref<const std::string&>().size() > 512)
      bad("metadata." + k, "metadata values must be strings of at most 512 characters");
  }
}

// reasoning: effort as vLLM accepts it (a template variable, reasoning_effort); summary "auto"
// (the model decides, and gives none) or none.
void read_reasoning(const ojson& r, ojson& kwargs) {
  if (!r.is_object()) wrong_type("reasoning", "an object");
  if (const ojson* e = field(r, "effort")) {
    if (!e->is_string()) wrong_type("reasoning.effort", "a string");
    kwargs["reasoning_effort"] = *e;
  }
  for (const char* k : {"summary", "generate_summary"})
    if (const ojson* s = field(r, k); s && *s != "auto")
      bad(std::string("reasoning.") + k, "reasoning summaries are not supported (only 'auto', which gives none)",
          "unsupported_parameter");
}

}  // namespace

std::string random_item_id(const char* prefix) {
  std::random_device rd;
  std::string id = prefix;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 6; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 8; ++j, v >>= 4) id += kHex[v & 15];
  }
  return id;
}

ApiError response_not_found(const std::string& id) {
  return ApiError(404, "Response with id '" + id + "' not found.", "response_id", "not_found");
}

void append_input_messages(const ojson& input, ojson& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) wrong_type("input", "a string or a list of input items");
  std::string reasoning;  // a reasoning item's text, for the assistant turn after it
  auto assistant = [&](ojson msg) {
    if (!reasoning.empty()) msg["reasoning_content"] = std::exchange(reasoning, "");
    messages.push_back(std::move(msg));
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) wrong_type(at, "an object");
    const std::string type = word(item, "type", item.contains("role") ? "message" : "", at + ".type");
    if (type == "message") {
      std::string role = text_of(item, "role", at + ".role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        bad(at + ".role", "role '" + role + "' is not one of user, system, developer, assistant");
      if (role == "developer") role = "system";  // chat templates know system
      const ojson* c = field(item, "content");
      if (!c) bad(at + ".content", "'" + at + ".content' is required", "missing_field");
      ojson msg = {{"role", role}, {"content", message_text(*c, at + ".content")}};
      if (role == "assistant")
        assistant(std::move(msg));
      else
        messages.push_back(std::move(msg));
    } else if (type == "function_call") {
      ojson call = {{"id", text_of(item, "call_id", at + ".call_id")},
                    {"type", "function"},
                    {"function",
                     {{"name", text_of(item, "name", at + ".name")},
                      {"arguments", text_of(item, "arguments", at + ".arguments")}}}};
      // Calls after an assistant turn belong to it (one turn: its text, then its calls).
      if (!messages.empty() && messages.back()["role"] == "assistant" && reasoning.empty())
        messages.back()["tool_calls"].push_back(std::move(call));
      else
        assistant({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({std::move(call)})}});
    } else if (type == "function_call_output") {
      const std::string call_id = text_of(item, "call_id", at + ".call_id");
      if (!names_call(messages, call_id))
        bad(at + ".call_id", "No tool call found for function call output with call_id " + call_id + ".");
      const ojson* out = field(item, "output");
      if (!out) bad(at + ".output", "'" + at + ".output' is required", "missing_field");
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", call_id}, {"content", message_text(*out, at + ".output")}});
    } else if (type == "reasoning") {
      const ojson* content = field(item, "content");
      if (content && !content->is_array()) wrong_type(at + ".content", "a list of reasoning_text parts");
      if (content)
        for (size_t j = 0; j < content->size(); ++j)
          reasoning += word((*content)[j], "text", "", at + ".content[" + std::to_string(j) + "].text");
    } else {
      bad(at + ".type",
          "input items of type '" + type +
              "' are not supported (message, function_call, function_call_output and reasoning are)",
          "unsupported_parameter");
    }
  }
}

ojson output_messages(const ojson& output) {
  ojson messages = ojson::array();
  append_input_messages(output, messages);
  return messages;
}

ResponsesRequest parse_responses_request(const ojson& body, const ModelInfo& m, const ConversationLookup& previous,
                                         std::string id, int64_t created_at) {
  audit_fields(body);
  ResponsesRequest r;
  r.id = std::move(id);
  r.created_at = created_at;
  if (const ojson* s = field(body, "store")) {
    if (!s->is_boolean()) wrong_type("store", "a boolean");
    r.store = s->get<bool>();
  }
  ojson chat = ojson::object();
  ojson& messages = chat["messages"] = ojson::array();
  ojson& echo = r.echo;
  echo["instructions"] = nullptr;
  if (const ojson* ins = field(body, "instructions")) {
    if (!ins->is_string()) wrong_type("instructions", "a string");
    messages.push_back({{"role", "system"}, {"content", *ins}});
    echo["instructions"] = *ins;
  }
  if (const ojson* prev = field(body, "previous_response_id")) {
    if (!prev->is_string()) wrong_type("previous_response_id", "a string");
    r.previous_response_id = prev->get<std::string>();
    r.conversation = previous(r.previous_response_id);
  }
  const ojson* input = field(body, "input");
  if (!input) bad("input", "'input' is required", "missing_field");
  append_input_messages(*input, r.conversation);
  for (auto& msg : r.conversation) messages.push_back(msg);

  if (const ojson* md = field(body, "metadata")) check_metadata(*md);
  echo["metadata"] = or_null(body, "metadata");
  ojson kwargs = ojson::object();
  if (const ojson* re = field(body, "reasoning")) read_reasoning(*re, kwargs);
  if (!kwargs.empty()) chat["chat_template_kwargs"] = kwargs;
  echo["reasoning"] = {{"effort", or_null(kwargs, "reasoning_effort")}, {"summary", nullptr}};
  if (const ojson* t = field(body, "tools")) {
    ojson tools = chat_tools(*t);
    if (!tools.empty()) chat["tools"] = std::move(tools);
    echo["tools"] = *t;
  } else {
    echo["tools"] = ojson::array();
  }
  const bool has_tools = chat.contains("tools");
  ojson tool_choice = has_tools ? ojson("auto") : ojson("none");
  if (const ojson* tc = field(body, "tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(*tc);
    tool_choice = *tc;
  }
  echo["tool_choice"] = tool_choice;
  echo["parallel_tool_calls"] = true;
  if (const ojson* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) wrong_type("parallel_tool_calls", "a boolean");
    echo["parallel_tool_calls"] = *p;
  }
  if (const ojson* t = field(body, "text")) {
    if (ojson rf = response_format(*t); !rf.is_null()) chat["response_format"] = std::move(rf);
  }
  echo["text"] = {{"format", body.contains("text") && body["text"].is_object() && body["text"].contains("format")
                                 ? body["text"]["format"]
                                 : ojson{{"type", "text"}}}};
  if (const ojson* mx = field(body, "max_output_tokens")) chat["max_tokens"] = *mx;
  for (const char* k : {"temperature", "top_p"})
    if (const ojson* v = field(body, k)) chat[k] = *v;
  for (const char* k : kSamplingExtras)
    if (const ojson* v = field(body, k)) chat[k] = *v;
  for (const char* k : {"user", "safety_identifier", "prompt_cache_key"})
    if (const ojson* v = field(body, k); v && !v->is_string()) wrong_type(k, "a string");
  try {
    r.gen = parse_chat_request(chat, m);
  } catch (ApiError& e) {  // the chat path names its own fields: name the request's
    for (auto [ours, theirs] : kChatNames)
      if (e.param == ours) e.param = theirs;
    throw;
  }
  if (r.gen.structured_field == "response_format") r.gen.structured_field = "text.format";
  if (const ojson* s = field(body, "stream")) {
    if (!s->is_boolean()) wrong_type("stream", "a boolean");
    r.gen.stream = s->get<bool>();
  }
  echo["max_output_tokens"] = or_null(body, "max_output_tokens");
  echo["temperature"] = r.gen.params.temperature;
  echo["top_p"] = r.gen.params.top_p;
  echo["user"] = or_null(body, "user");
  echo["previous_response_id"] = r.previous_response_id.empty() ? ojson(nullptr) : ojson(r.previous_response_id);
  echo["store"] = r.store;
  if (!r.gen.parsers.reasoning.empty() && m.llm && m.llm->tokenizer())
    if (auto end = m.llm->tokenizer()->token_to_id(output::reasoning_tags(r.gen.parsers.reasoning).end))
      r.reasoning_end_token = *end;
  return r;
}

}  // namespace nanovllm::server
