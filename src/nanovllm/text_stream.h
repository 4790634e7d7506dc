// Text of one request as it streams: incremental detokenization plus stop strings. Each push
// returns the text that is safe to show now: a partial stop string at the end is held back, and
// once a stop string appears the text is cut before it and the stream reports stopped().
#pragma once
#include <string>
#include <vector>

#include "nanovllm/tokenizer/tokenizer.h"

namespace nanovllm {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop, bool skip_special_tokens);
  // New visible text (maybe empty). Ids the tokenizer does not know (a model's padded vocabulary
  // beyond the tokenizer's) have no text, as in transformers.
  std::string push(int32_t id);
  std::string finish();  // at the end of the request: what was held back
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // visible text so far

 private:
  std::string advance(std::string delta, bool final);

  const Tokenizer& tok_;
  IncrementalDetokenizer detok_;
  std::vector<std::string> stop_;
  std::string text_;     // emitted
  std::string pending_;  // decoded but held back
  bool stopped_ = false;
};

}  // namespace nanovllm
