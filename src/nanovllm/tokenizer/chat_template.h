// Chat templates: a Jinja subset interpreter written in this project, enough for the templates
// of Qwen3, Qwen2.5 and Llama 3.x. Implementation: the engine in jinja/, this facade in chat_template.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nanovllm {

// Objects keep their insertion order (ordered_json), as Python dicts do: a tool schema renders
// through `tojson` with its keys in the order the client sent them, as in transformers/vLLM.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array();  // [{role, content, tool_calls?, reasoning_content?}]
  nlohmann::ordered_json tools;         // null or array of tool specs
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // unset: the template's default
  std::string bos_token, eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables for the template
};

class ChatTemplate {
 public:
  // Parses once; throws TokenizerError naming the construct and position (line:col).
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  // Renders; raise_exception and runtime errors throw TokenizerError.
  std::string render(const ChatTemplateInputs& in) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
