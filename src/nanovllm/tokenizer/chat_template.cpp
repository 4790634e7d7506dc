// ChatTemplate: parse once, render many times with a fresh scope per render.
#include "nanovllm/tokenizer/chat_template.h"

#include "nanovllm/jinja/interpreter.h"
#include "nanovllm/jinja/lexer.h"
#include "nanovllm/jinja/parser.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

struct ChatTemplate::Impl {
  std::string source;
  jinja::NodeList program;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->source = source;
  impl_->program = jinja::parse(impl_->source, jinja::tokenize(impl_->source));
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatTemplateInputs& in, size_t max_output) const {
  using jinja::Value;
  auto globals = std::make_shared<jinja::Env>();
  auto namespaces = std::make_shared<std::vector<Value>>();
  jinja::install_globals(*globals, namespaces);
  // On every exit, empty the namespaces and the globals: this breaks any reference cycle the
  // template built (`ns.me = ns`), so nothing outlives the render.
  struct Cleanup {
    std::shared_ptr<jinja::Env> env;
    std::shared_ptr<std::vector<Value>> ns;
    ~Cleanup() {
      for (auto& v : *ns) v.object().items.clear();
      ns->clear();
      env->vars.clear();
    }
  } cleanup{globals, namespaces};
  try {
    // The variables transformers' apply_chat_template passes; `extra` may add or override.
    globals->set("messages", jinja::from_json(in.messages));
    globals->set("tools", jinja::from_json(in.tools));
    globals->set("add_generation_prompt", Value(in.add_generation_prompt));
    globals->set("bos_token", Value(in.bos_token));
    globals->set("eos_token", Value(in.eos_token));
    if (in.enable_thinking) globals->set("enable_thinking", Value(*in.enable_thinking));
    if (in.extra.is_object())
      for (const auto& [k, v] : in.extra.items()) globals->set(k, jinja::from_json(v));
  } catch (const jinja::RuntimeError& e) {
    throw TokenizerError(std::string("chat template inputs: ") + e.what());
  }
  jinja::Limits limits;
  limits.max_output = max_output;
  auto bytes = [](const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size();
  };
  const size_t input_bytes = bytes(in.messages) + bytes(in.tools) + bytes(in.extra);
  limits.max_work = kRenderWorkPerInputByte * int64_t(input_bytes) + kRenderWorkPerOutputByte * int64_t(max_output) +
                    kRenderWorkFloor;
  jinja::Interpreter interp(impl_->source, limits);
  return interp.render(impl_->program, globals);
}

}  // namespace nanovllm
