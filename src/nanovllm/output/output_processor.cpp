#include "nanovllm/output/output_processor.h"

#include <algorithm>

#include "nanovllm/output/text_match.h"

namespace nanovllm::output {

OutputProcessor::OutputProcessor(const Tokenizer* tok, const SamplingParams& sp, const OutputParsers& parsers)
    : tok_(tok), stop_(sp.stop), include_stop_(sp.include_stop_str_in_output) {
  // A parser whose marker is a special token ([TOOL_CALLS]) needs it in the text, as vLLM's
  // MistralToolParser turns skip_special_tokens off.
  const bool skip =
      sp.skip_special_tokens && !(!parsers.tool.empty() && tool_parser_keeps_special_tokens(parsers.tool));
  if (tok_) detok_ = std::make_unique<IncrementalDetokenizer>(*tok_, skip);
  if (!parsers.reasoning.empty()) reasoning_ = make_reasoning_parser(parsers.reasoning);
  if (!parsers.tool.empty()) tools_ = make_tool_parser(parsers.tool);
}

OutputDelta OutputProcessor::push(int32_t id, FinishReason engine_finish) {
  OutputDelta d;
  if (finished_) return d;
  if (!tok_) {  // token ids only
    d.finish = engine_finish;
    finished_ = engine_finish != FinishReason::None;
    return d;
  }
  std::string raw;
  // Ids past the tokenizer's vocabulary (a model's padded embedding: 151936 rows vs 151669
  // tokens for Qwen3) have no text, as in transformers. The token that stopped the request
  // (EOS, a stop_token_id) shows only with include_stop_str_in_output, as in vLLM.
  const bool stop_token = engine_finish == FinishReason::Stop && !include_stop_;
  if (!stop_token && id >= 0 && id < tok_->vocab_size()) raw = detok_->push(id);
  const bool final = engine_finish != FinishReason::None;
  if (final) raw += detok_->flush();
  const std::string visible = stop_filter(std::move(raw), final);
  if (stopped_) {
    d.finish = FinishReason::Stop;
    d.stopped_by_string = engine_finish == FinishReason::None;
  } else {
    d.finish = engine_finish;
  }
  finished_ = d.finish != FinishReason::None;
  parse(d, visible, finished_);
  return d;
}

std::string OutputProcessor::stop_filter(std::string delta, bool final) {
  pending_ += delta;
  // Held-back text is always the longest suffix that could start a stop string, so a stop string
  // can only begin inside pending_ (never in the text already shown).
  // The earliest stop string wins (the first listed of those starting there).
  size_t start = std::string::npos;
  const std::string* match = nullptr;
  for (auto& s : stop_) {
    const size_t at = pending_.find(s);
    if (at < start) start = at, match = &s;
  }
  std::string out;
  if (match) {
    out = pending_.substr(0, start + (include_stop_ ? match->size() : 0));
    matched_stop_ = *match;
    pending_.clear();
    stopped_ = true;
  } else {
    size_t hold = 0;
    if (!final)
      for (auto& s : stop_) hold = std::max(hold, partial_marker_suffix(pending_, s));
    out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
  }
  text_ += out;
  return out;
}

void OutputProcessor::parse(OutputDelta& d, const std::string& text, bool final) {
  std::string content = text;
  if (reasoning_) {
    ReasoningDelta r = reasoning_->push(text);
    if (final) {
      ReasoningDelta tail = reasoning_->finish();
      r.reasoning += tail.reasoning;
      r.content += tail.content;
    }
    d.reasoning = std::move(r.reasoning);
    content = std::move(r.content);
  }
  if (tools_) {
    ToolDelta t = tools_->push(content);
    if (final) {
      ToolDelta tail = tools_->finish();
      t.content += tail.content;
      for (auto& c : tail.calls) t.calls.push_back(std::move(c));
    }
    content = std::move(t.content);
    d.tool_calls = std::move(t.calls);
    called_tools_ = called_tools_ || !d.tool_calls.empty();
  }
  d.text = std::move(content);
}

}  // namespace nanovllm::output
