#include "nanovllm/text_stream.h"

#include <algorithm>

namespace nanovllm {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop, bool skip_special_tokens)
    : tok_(tok), detok_(tok, skip_special_tokens), stop_(std::move(stop)) {}

std::string TextStream::push(int32_t id) {
  if (stopped_ || id < 0 || id >= tok_.vocab_size()) return "";
  return advance(detok_.push(id), false);
}

std::string TextStream::finish() {
  if (stopped_) return "";
  return advance(detok_.flush(), true);
}

std::string TextStream::advance(std::string delta, bool final) {
  pending_ += delta;
  // Held-back text is always the longest suffix that could start a stop string, so a stop
  // string can only begin inside pending_ (never in the text already shown).
  size_t cut = std::string::npos;
  for (auto& s : stop_) cut = std::min(cut, pending_.find(s));
  std::string out;
  if (cut != std::string::npos) {
    out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
  } else if (final || stop_.empty()) {
    out = std::move(pending_);
    pending_.clear();
  } else {
    // Hold back the longest suffix of pending_ that is a prefix of some stop string.
    size_t hold = 0;
    for (auto& s : stop_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
  }
  text_ += out;
  return out;
}

}  // namespace nanovllm
