// Chat templates: a Jinja subset interpreter written in this project, enough for the templates
// of Qwen3, Qwen2.5 and Llama 3.x. Implementation: the engine in jinja/, this facade in chat_template.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
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

// A render's work budget, about one unit per byte of memory touched (jinja/interpreter.h):
// templates read each message a few times (64 per byte of input leaves room), write their output
// once (4 per byte of max_output), and the floor covers small inputs (~64 MB: tens of ms).
inline constexpr int64_t kRenderWorkPerInputByte = 64;
inline constexpr int64_t kRenderWorkPerOutputByte = 4;
inline constexpr int64_t kRenderWorkFloor = int64_t(64) << 20;
// The most text a render may produce unless the caller asks for less (the server asks for a
// bound relative to the model's context: server/openai_requests.cpp).
inline constexpr size_t kMaxChatTemplateOutput = 64u << 20;

class ChatTemplate {
 public:
  // Parses once; throws TokenizerError naming the construct and position (line:col).
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  // Renders; raise_exception and runtime errors throw TokenizerError, and so does a render that
  // would produce more than `max_output` bytes or do more work than its inputs justify (loops,
  // copies: the budget above).
  std::string render(const ChatTemplateInputs& in, size_t max_output = kMaxChatTemplateOutput) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
