#include "nanovllm/output/output_processor.h"

namespace nanovllm::output {

OutputProcessor::OutputProcessor(const Tokenizer* tok, const SamplingParams& sp, const OutputParsers& parsers)
    : tok_(tok), stops_(sp.stop, sp.include_stop_str_in_output), include_stop_(sp.include_stop_str_in_output) {
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
  const std::string visible = stops_.push(raw, final);
  text_ += visible;
  if (stops_.stopped()) {
    d.finish = FinishReason::Stop;
    d.stopped_by_string = engine_finish == FinishReason::None;
  } else {
    d.finish = engine_finish;
  }
  finished_ = d.finish != FinishReason::None;
  parse(d, visible, finished_);
  return d;
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
