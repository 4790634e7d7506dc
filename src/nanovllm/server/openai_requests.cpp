// Request side of openai_protocol.h: parsing and validating the bodies of /v1/completions,
// /v1/chat/completions, /tokenize and /detokenize.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "nanovllm/config/request_json.h"
#include "nanovllm/frontend/chat_messages.h"
#include "nanovllm/server/chat_tools.h"
#include "nanovllm/server/openai_logprobs.h"
#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/request_caps.h"
#include "nanovllm/server/request_field_errors.h"
#include "nanovllm/server/request_fields.h"
#include "nanovllm/server/structured_fields.h"
#include "nanovllm/tokenizer/utf8.h"

namespace nanovllm::server {

namespace {

using fields::bad;
using fields::field;
using fields::wrong_type;

bool boolean(const ojson& j, const char* name, bool dflt) {
  const ojson* v = field(j, name);
  if (!v) return dflt;
  if (!v->is_boolean()) wrong_type(name, "a boolean");
  return v->get<bool>();
}

int64_t request_int(const ojson& v, const std::string& param) {
  try {
    return request_integer(v, param);
  } catch (const InvalidRequest& e) {
    bad(param, e.what(), "invalid_type");
  }
}

const Tokenizer& tokenizer_of(const ModelInfo& m) {
  if (!m.llm || !m.llm->tokenizer())  // no engine: unit tests of token-id requests
    bad("", "the server has no tokenizer (--skip-tokenizer-init): send prompts as token ids", "no_tokenizer");
  return *m.llm->tokenizer();
}

std::vector<int32_t> encode(const ModelInfo& m, const std::string& text, const std::string& param,
                            bool add_special_tokens) {
  const Tokenizer& tok = tokenizer_of(m);
  check_text_bytes(int64_t(text.size()), param, m);  // tokenizing costs in proportion to the bytes
  try {
    return tok.encode(text, add_special_tokens);
  } catch (const UserError& e) {
    bad(param, param + ": " + e.what());
  }
}

std::vector<int32_t> token_ids(const ojson& arr, const std::string& param) {
  std::vector<int32_t> ids;
  for (auto& t : arr) {
    if (!t.is_number_integer()) wrong_type(param, "a list of integer token ids");
    const int64_t v = request_int(t, param);
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      bad(param, param + ": token id " + std::to_string(v) + " is out of range");
    ids.push_back(int32_t(v));
  }
  return ids;
}

// Reads the fields common to both endpoints; `default_max_tokens(n)` gives max_tokens for a
// prompt of n tokens when the client sent none.
template <class DefaultMax>
void read_common(const ojson& body, GenerationRequest& r, const ModelInfo& m, const std::string& prompt_param,
                 DefaultMax default_max_tokens) {
  read_choice_fields(body, r);  // n, best_of, logprobs, top_logprobs, prompt_logprobs (openai_logprobs.cpp)
  r.stream = boolean(body, "stream", false);
  r.include_usage = m.force_include_usage;  // vLLM's should_include_usage
  if (const ojson* so = field(body, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object");
    if (!r.stream) bad("stream_options", "Stream options can only be defined when `stream=True`.");
    // vLLM's default once stream_options is given
    r.include_usage = boolean(*so, "include_usage", true) || m.force_include_usage;
    r.continuous_usage = r.include_usage && boolean(*so, "continuous_usage_stats", false);
  }
  if (const ojson* id = field(body, "request_id")) {
    if (!id->is_string()) wrong_type("request_id", "a string");
    r.request_id = id->get<std::string>();
  }
  const bool has_max = field(body, "max_tokens") || field(body, "max_completion_tokens");
  check_stop_caps(field(body, "stop"), m);
  try {
    read_sampling_fields(body, r.params);
  } catch (const InvalidRequest& e) {
    bad(e.param, e.what());
  }
  check_request_caps(r, m);
  if (!r.params.stop.empty()) tokenizer_of(m);
  // The context: every prompt must leave room for at least one token, and for max_tokens.
  int64_t max_default = std::numeric_limits<int64_t>::max();
  for (auto& p : r.prompts) {
    const int64_t n = int64_t(p.size());
    if (n == 0) bad(prompt_param, "the prompt is empty");
    if (n >= m.max_model_len)
      bad(prompt_param,
          "This model's maximum context length is " + std::to_string(m.max_model_len) +
              " tokens. However, your prompt has " + std::to_string(n) +
              " tokens (at least one token must be generated).",
          "context_length_exceeded");
    if (has_max && n + r.params.max_tokens > m.max_model_len)
      bad("max_tokens",
          "This model's maximum context length is " + std::to_string(m.max_model_len) +
              " tokens. However, you requested " + std::to_string(n + r.params.max_tokens) + " tokens (" +
              std::to_string(n) + " in the prompt, " + std::to_string(r.params.max_tokens) +
              " for the completion). Please reduce the prompt or max_tokens.",
          "context_length_exceeded");
    max_default = std::min(max_default, m.defaults.default_max_tokens(default_max_tokens(n)));
  }
  if (!has_max) r.params.max_tokens = int(max_default);
}

// messages -> the template's input (frontend/chat_messages.h, shared with the Python package).
ChatTemplateInputs chat_inputs(const ojson& body, const ModelInfo& m) {
  const ojson* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required", "missing_field");
  ChatTemplateInputs in;
  in.messages = chat_template_messages(*msgs);
  if (const ojson* t = field(body, "tools")) {
    if (!t->is_array()) wrong_type("tools", "a list of tools");
    if (!t->empty()) in.tools = *t;
  }
  in.add_generation_prompt = boolean(body, "add_generation_prompt", true);
  // The request's chat_template_kwargs over --default-chat-template-kwargs (vLLM merges them so).
  ojson kwargs = m.default_chat_template_kwargs;
  if (const ojson* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object");
    for (auto& [k, v] : kw->items()) kwargs[k] = v;
  }
  apply_chat_template_kwargs(kwargs, in);
  return in;
}

// Through the model's chat template, or the request's own `chat_template` (vLLM's field).
std::string render_chat(const ModelInfo& m, const ojson& body, const ChatTemplateInputs& in) {
  tokenizer_of(m);  // a 400 when the server has none
  const ojson* source = field(body, "chat_template");
  if (source && !source->is_string()) wrong_type("chat_template", "a string (a Jinja template)");
  if (!source && !m.has_chat_template)  // vLLM refuses such a request too
    bad("messages",
        "the model's tokenizer has no chat template, so chat requests cannot be rendered: start the server with "
        "--chat-template FILE_OR_STRING, or send the template as the request's 'chat_template'");
  std::unique_ptr<ChatTemplate> own;
  try {
    own = source ? std::make_unique<ChatTemplate>(source->get<std::string>()) : nullptr;
  } catch (const UserError& e) {
    bad("chat_template", std::string("chat_template: ") + e.what());
  }
  // Rendering stops past the text that could be tokenized at all (request_caps.h), and the
  // interpreter bounds the work of loops that print nothing.
  const int64_t limit = max_text_bytes(m);
  try {
    return m.llm->apply_chat_template(in, own.get(), size_t(limit));
  } catch (const UserError& e) {
    std::string msg = std::string("chat template: ") + e.what();
    if (msg.find("output exceeds") != std::string::npos)
      msg += " (the limit is " + std::to_string(kMaxBytesPerToken) + " bytes per token x max_model_len " +
             std::to_string(m.max_model_len) + ")";
    bad(own ? "chat_template" : "messages", msg);
  }
}

// vLLM's chat echo: the answer's role is --response-role with add_generation_prompt, else the last
// message's; when the last message has that role, its content (text parts joined) is echoed.
std::string chat_echo_text(const ojson& body, const ChatTemplateInputs& in, const ModelInfo& m) {
  if (!boolean(body, "echo", false)) return "";
  const ojson& last = in.messages.back();  // chat_inputs: not empty, contents made strings
  const std::string role = in.add_generation_prompt ? m.response_role : last["role"].get<std::string>();
  if (last["role"] != role) return "";
  return last["content"].get<std::string>();
}

void warn_unknown_fields(const ojson& body, Endpoint ep) {
  const std::vector<std::string> unknown = audit_request_fields(body, ep);
  if (unknown.empty()) return;
  std::string names;
  for (auto& k : unknown) names += (names.empty() ? "" : ", ") + k;
  std::fprintf(stderr, "warning: the following fields were present in the request but ignored: %s\n", names.c_str());
}

}  // namespace

ojson parse_body(const std::string& body) {
  const size_t bad_at = utf8::find_invalid(body);
  if (bad_at != utf8::kValid)
    bad("", "the request body is not valid UTF-8 (byte offset " + std::to_string(bad_at) + ")", "invalid_utf8");
  ojson j;
  try {
    j = parse_request_json<ojson>(body);
  } catch (const InvalidRequest& e) {
    bad("", std::string("the request body is ") + e.what(), "invalid_json");
  }
  if (!j.is_object()) bad("", "the request body must be a JSON object", "invalid_json");
  return j;
}

bool serves(const ModelInfo& m, const std::string& name) {
  return std::find(m.names.begin(), m.names.end(), name) != m.names.end() || name == m.name;
}

void check_model(const ojson& body, const ModelInfo& m) {
  const ojson* v = field(body, "model");
  if (!v) return;
  if (!v->is_string()) wrong_type("model", "a string");
  if (!serves(m, v->get<std::string>()))
    throw ApiError(404, "The model '" + v->get<std::string>() + "' does not exist; this server serves '" + m.name + "'",
                   "model", "model_not_found");
}

GenerationRequest parse_completion_request(const ojson& body, const ModelInfo& m) {
  warn_unknown_fields(body, Endpoint::Completions);
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  r.params = m.defaults.params();  // the generation config's defaults; the request's fields win
  const ojson* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required", "missing_field");
  const std::string want = "a string, a list of strings, a list of token ids or a list of token-id lists";
  // vLLM's default for completions: the tokenizer's special tokens (BOS) are added.
  const bool specials = boolean(body, "add_special_tokens", true);
  if (p->is_string()) {
    r.prompts.push_back(encode(m, p->get<std::string>(), "prompt", specials));
  } else if (p->is_array() && !p->empty()) {
    if ((*p)[0].is_number_integer()) {
      r.prompts.push_back(token_ids(*p, "prompt"));
    } else {
      for (auto& e : *p) {
        if (e.is_string())
          r.prompts.push_back(encode(m, e.get<std::string>(), "prompt", specials));
        else if (e.is_array())
          r.prompts.push_back(token_ids(e, "prompt"));
        else
          wrong_type("prompt", want);
      }
    }
  } else {
    wrong_type("prompt", want);
  }
  read_common(body, r, m, "prompt", [&](int64_t n) { return std::min<int64_t>(16, m.max_model_len - n); });
  read_structured(body, m, {}, false, m.reasoning_parser, r);
  return r;
}

GenerationRequest parse_chat_request(const ojson& body, const ModelInfo& m) {
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  warn_unknown_fields(body, Endpoint::ChatCompletions);
  r.params = m.defaults.params();  // the generation config's defaults; the request's fields win
  const ChatTemplateInputs in = chat_inputs(body, m);
  StructuredOutputs forced;  // tool_choice "required" or naming a function: the calls' grammar
  r.parsers = chat_output_parsers(body, m, !in.tools.is_null(), in.enable_thinking, &forced);
  const std::string text = render_chat(m, body, in);
  // vLLM's default for chat: none added (the template writes them).
  r.prompts.push_back(encode(m, text, "messages", boolean(body, "add_special_tokens", false)));
  read_common(body, r, m, "messages", [&](int64_t n) { return m.max_model_len - n; });
  read_structured(body, m, forced, true, r.parsers.reasoning, r);
  r.chat_echo = chat_echo_text(body, in, m);
  return r;
}

ojson tokenize_response(const ojson& body, const ModelInfo& m) {
  std::vector<int32_t> ids;
  if (field(body, "messages")) {
    ids = encode(m, render_chat(m, body, chat_inputs(body, m)), "messages", boolean(body, "add_special_tokens", false));
  } else {
    const ojson* p = field(body, "prompt");
    if (!p) bad("prompt", "'prompt' or 'messages' is required", "missing_field");
    if (!p->is_string()) wrong_type("prompt", "a string");
    ids = encode(m, p->get<std::string>(), "prompt", boolean(body, "add_special_tokens", true));
  }
  // return_token_strs: each token's vocabulary string (convert_ids_to_tokens), as vLLM.
  ojson strs = nullptr;
  if (boolean(body, "return_token_strs", false)) {
    strs = ojson::array();
    const Tokenizer& tok = tokenizer_of(m);
    for (int32_t id : ids) strs.push_back(tok.id_to_token(id));
  }
  return {{"count", ids.size()}, {"max_model_len", m.max_model_len}, {"tokens", ids}, {"token_strs", std::move(strs)}};
}

ojson detokenize_response(const ojson& body, const ModelInfo& m) {
  const ojson* t = field(body, "tokens");
  if (!t) bad("tokens", "'tokens' is required", "missing_field");
  if (!t->is_array()) wrong_type("tokens", "a list of integer token ids");
  const auto ids = token_ids(*t, "tokens");
  try {
    return {{"prompt", tokenizer_of(m).decode(ids, false)}};
  } catch (const UserError& e) {
    bad("tokens", std::string("tokens: ") + e.what());
  }
}

}  // namespace nanovllm::server
