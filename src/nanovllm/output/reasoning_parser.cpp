#include "nanovllm/output/reasoning_parser.h"

#include "nanovllm/output/text_match.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kEndThink = "</think>";
}  // namespace

ReasoningDelta ThinkReasoningParser::push(std::string_view text) {
  ReasoningDelta d;
  std::string buf = std::move(held_) + std::string(text);
  held_.clear();
  if (state_ == State::AtStart) {  // a <think> at the very start is dropped
    if (buf.size() < kThink.size() && kThink.substr(0, buf.size()) == buf) {
      held_ = std::move(buf);
      return d;
    }
    if (buf.rfind(kThink, 0) == 0) buf.erase(0, kThink.size());
    state_ = State::Thinking;
  }
  // Each pass consumes the buffer up to a tag (changing state) or to a possible partial tag.
  for (;;) {
    if (state_ == State::Answer) {
      d.content += buf;
      return d;
    }
    const std::string_view tag = state_ == State::BeforeThink ? kThink : kEndThink;
    std::string& out = state_ == State::BeforeThink ? d.content : d.reasoning;
    const size_t at = buf.find(tag);
    if (at == std::string::npos) {
      const size_t hold = partial_marker_suffix(buf, tag);
      out.append(buf, 0, buf.size() - hold);
      held_ = buf.substr(buf.size() - hold);
      return d;
    }
    out.append(buf, 0, at);
    buf.erase(0, at + tag.size());
    state_ = state_ == State::BeforeThink ? State::Thinking : State::Answer;
  }
}

ReasoningDelta ThinkReasoningParser::finish() {
  ReasoningDelta d;
  (state_ == State::Thinking || state_ == State::AtStart ? d.reasoning : d.content) = std::move(held_);
  held_.clear();
  return d;
}

bool is_reasoning_parser(const std::string& name) { return name == "qwen3" || name == "deepseek_r1"; }

std::string reasoning_parser_names() { return "deepseek_r1, qwen3"; }

ReasoningTags reasoning_tags(const std::string& name) {
  if (is_reasoning_parser(name)) return {kThink, kEndThink};
  throw UserError("unknown reasoning parser '" + name + "' (available: " + reasoning_parser_names() + ")");
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name) {
  if (name == "qwen3") return std::make_unique<Qwen3ReasoningParser>();
  if (name == "deepseek_r1") return std::make_unique<DeepSeekR1ReasoningParser>();
  throw UserError("unknown reasoning parser '" + name + "' (available: " + reasoning_parser_names() + ")");
}

}  // namespace nanovllm::output
