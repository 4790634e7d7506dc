// Reasoning parsers (vLLM's --reasoning-parser): split a model's streamed text into reasoning
// (`message.reasoning_content`) and the answer (`message.content`).
//
// qwen3 (vLLM's Qwen3ReasoningParser): the text inside the first <think>...</think> is
// reasoning, the rest content. Output without <think> at all is all content (the chat template
// with enable_thinking=false closes the think block in the prompt, so the model writes content);
// a <think> never closed (the request ran out of tokens) leaves the rest as reasoning, as vLLM's
// streaming parser does. Tags split over deltas are held back until they are known.
//
// deepseek_r1 (vLLM's DeepSeekR1ReasoningParser): the model starts inside the reasoning (the
// chat template puts <think> in the prompt), so everything before the first </think> is
// reasoning, with or without a <think> at the very start (dropped); output that never closes it
// is all reasoning. After </think>, content.
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

// The <think>...</think> parsers: qwen3 (starts_thinking false) and deepseek_r1 (true).
class ThinkReasoningParser : public ReasoningParser {
 public:
  explicit ThinkReasoningParser(bool starts_thinking) : state_(starts_thinking ? State::AtStart : State::BeforeThink) {}
  ReasoningDelta push(std::string_view text) override;
  ReasoningDelta finish() override;

 private:
  // AtStart: in the reasoning, a <think> may still come first (and is dropped).
  enum class State { BeforeThink, AtStart, Thinking, Answer };
  State state_;
  std::string held_;  // a possible partial tag at the end of what was pushed
};

class Qwen3ReasoningParser : public ThinkReasoningParser {
 public:
  Qwen3ReasoningParser() : ThinkReasoningParser(false) {}
};

class DeepSeekR1ReasoningParser : public ThinkReasoningParser {
 public:
  DeepSeekR1ReasoningParser() : ThinkReasoningParser(true) {}
};

// The parsers `--reasoning-parser` accepts (reasoning_parser_names()); others throw UserError naming them.
std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name);
bool is_reasoning_parser(const std::string& name);
std::string reasoning_parser_names();  // "deepseek_r1, qwen3"

// The tags that open and close a parser's reasoning block ("<think>", "</think>" for both): the
// front ends find where a structured output's grammar starts with them. Throws as make_reasoning_parser.
struct ReasoningTags {
  std::string_view start, end;
};
ReasoningTags reasoning_tags(const std::string& name);

}  // namespace nanovllm::output
