#include "nanovllm/output/bracketed_tool_parser.h"

namespace nanovllm::output {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}
}  // namespace

void BracketedToolParser::emit(ToolDelta& d, std::string_view text) {
  if (!all_whitespace(text)) at_start_ = false;
  out_.text(d, text);
}

ToolDelta BracketedToolParser::push(std::string_view text) {
  ToolDelta d;
  const std::string buf = std::move(held_) + std::string(text);
  held_.clear();
  std::string_view rest = buf;
  for (;;) {
    if (!in_region_) {
      const Start s = find_start(rest, at_start_, out_.after_call());
      if (s.at == std::string_view::npos) {
        emit(d, rest.substr(0, rest.size() - s.hold));
        held_ = rest.substr(rest.size() - s.hold);
        return d;
      }
      emit(d, rest.substr(0, s.at));
      rest.remove_prefix(s.at);
      in_region_ = true;
      head_at_ = s.len;
      value_at_ = std::string_view::npos;
      scan_.reset();
    }
    // In a region: `rest` starts with it.
    if (value_at_ == std::string_view::npos) {
      size_t k = head_at_;
      while (k < rest.size() && (is_space(rest[k]) || head_char(rest[k]))) ++k;
      if (k == rest.size()) {
        held_ = rest;
        return d;
      }
      if (!opens_value(rest[k])) {  // no value after the marker: the region so far is content
        k = std::max<size_t>(k, 1);
        emit(d, rest.substr(0, k));
        rest.remove_prefix(k);
        end_region();
        continue;
      }
      value_at_ = k;
    }
    const size_t e = scan_.end_of(rest.substr(value_at_));
    if (e == std::string_view::npos) {
      held_ = rest;
      return d;
    }
    const size_t end = value_at_ + e;
    auto calls = calls_of(trim(rest.substr(head_at_, value_at_ - head_at_)), rest.substr(value_at_, e));
    if (calls && !calls->empty()) {
      for (ToolCall& c : *calls) out_.call(d, std::move(c));
    } else {
      emit(d, rest.substr(0, end));
    }
    rest.remove_prefix(end);
    end_region();
  }
}

ToolDelta BracketedToolParser::finish() {
  ToolDelta d;
  emit(d, held_);  // a partial marker, leading whitespace, or a region never closed: content
  held_.clear();
  in_region_ = false;
  out_.finish();
  return d;
}

}  // namespace nanovllm::output
