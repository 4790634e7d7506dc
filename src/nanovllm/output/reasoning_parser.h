// Reasoning parsers (vLLM's --reasoning-parser): split a model's streamed text into reasoning
// (`message.reasoning_content`) and the answer (`message.content`).
//
// qwen3 (vLLM's Qwen3ReasoningParser): the text inside the first <think>...</think> is
// reasoning, the rest content. Output without <think> at all is all content (the chat template
// with enable_thinking=false closes the think block in the prompt, so the model writes content);
// a <think> never closed (the request ran out of tokens) leaves the rest as reasoning, as vLLM's
// streaming parser does. Tags split over deltas are held back until they are known.
#pragma once
#include <memory>
#include <string>
#include <string_view>

namespace nanovllm::output {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  virtual ~ReasoningParser() = default;
  virtual ReasoningDelta push(std::string_view text) = 0;  // the next piece of the model's text
  virtual ReasoningDelta finish() = 0;                     // at the end: what was held back
};

class Qwen3ReasoningParser : public ReasoningParser {
 public:
  ReasoningDelta push(std::string_view text) override;
  ReasoningDelta finish() override;

 private:
  enum class State { BeforeThink, Thinking, Answer };
  State state_ = State::BeforeThink;
  std::string held_;  // a possible partial tag at the end of what was pushed
};

// The parsers `--reasoning-parser` accepts ("qwen3"); others throw UserError naming them.
std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name);
bool is_reasoning_parser(const std::string& name);

// The tags that open and close a parser's reasoning block ("<think>", "</think>" for qwen3): the
// front ends find where a structured output's grammar starts with them. Throws as make_reasoning_parser.
struct ReasoningTags {
  std::string_view start, end;
};
ReasoningTags reasoning_tags(const std::string& name);

}  // namespace nanovllm::output
