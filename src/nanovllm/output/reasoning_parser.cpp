#include "nanovllm/output/reasoning_parser.h"

#include "nanovllm/output/text_match.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kEndThink = "</think>";
}  // namespace

ReasoningDelta Qwen3ReasoningParser::push(std::string_view text) {
  ReasoningDelta d;
  std::string buf = std::move(held_) + std::string(text);
  held_.clear();
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

ReasoningDelta Qwen3ReasoningParser::finish() {
  ReasoningDelta d;
  (state_ == State::Thinking ? d.reasoning : d.content) = std::move(held_);
  held_.clear();
  return d;
}

bool is_reasoning_parser(const std::string& name) { return name == "qwen3"; }

ReasoningTags reasoning_tags(const std::string& name) {
  if (name == "qwen3") return {kThink, kEndThink};
  throw UserError("unknown reasoning parser '" + name + "' (available: qwen3)");
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name) {
  if (name == "qwen3") return std::make_unique<Qwen3ReasoningParser>();
  throw UserError("unknown reasoning parser '" + name + "' (available: qwen3)");
}

}  // namespace nanovllm::output
