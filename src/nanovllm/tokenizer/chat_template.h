// Chat templates: a Jinja subset interpreter written in this project, enough for the templates
// of Qwen3, Qwen2.5 and Llama 3.x. Implementation: tokenizer/jinja_*.cpp, chat_template.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nanovllm {

struct ChatTemplateInputs {
  nlohmann::json messages = nlohmann::json::array();  // [{role, content, tool_calls?, reasoning_content?}]
  nlohmann::json tools;                               // null or array of tool specs
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;                // unset: the template's default
  std::string bos_token, eos_token;
  nlohmann::json extra = nlohmann::json::object();    // more variables for the template
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
