// Streaming detokenization, vLLM's prefix_offset/read_offset scheme: each push decodes the window
// ids[prefix_offset..] and emits what it adds to the text of ids[prefix_offset..read_offset).
// While the window's text ends in U+FFFD (an incomplete UTF-8 sequence, e.g. the first bytes of an
// emoji split over several tokens) nothing is emitted. Windows only ever start where the text up
// to them was complete, so every window decodes to an exact slice of decode(all ids), and the
// deltas concatenate to it.
#include <string_view>

#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/tokenizer/utf8.h"

namespace nanovllm {
namespace {

bool ends_with_replacement(std::string_view s) {
  return s.size() >= utf8::kReplacement.size() && s.substr(s.size() - utf8::kReplacement.size()) == utf8::kReplacement;
}

// new_text from where prefix_text ends. The window's text normally extends the prefix's; it does
// not when a ByteFallback run turns invalid after the prefix's part of it was emitted (bytes "A"
// then 0xE2 then a normal token: "A" became U+FFFD U+FFFD): what was emitted stays, and the delta
// starts at a character boundary so that it is valid UTF-8 either way.
std::string delta(const std::string& new_text, const std::string& prefix_text) {
  size_t start = prefix_text.size();
  while (start < new_text.size() && (static_cast<unsigned char>(new_text[start]) & 0xC0) == 0x80) ++start;
  return new_text.substr(start);
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::string prefix_text, new_text;
  try {
    prefix_text = tok_.decode({ids_.begin() + prefix_offset_, ids_.begin() + read_offset_}, skip_special_);
    new_text = tok_.decode({ids_.begin() + prefix_offset_, ids_.end()}, skip_special_);
  } catch (...) {
    ids_.pop_back();  // a bad id leaves the stream as it was
    throw;
  }
  if (new_text.size() <= prefix_text.size() || ends_with_replacement(new_text)) return "";
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return delta(new_text, prefix_text);
}

std::string IncrementalDetokenizer::flush() {
  const std::string prefix_text =
      tok_.decode({ids_.begin() + prefix_offset_, ids_.begin() + read_offset_}, skip_special_);
  const std::string new_text = tok_.decode({ids_.begin() + prefix_offset_, ids_.end()}, skip_special_);
  prefix_offset_ = read_offset_ = ids_.size();
  return new_text.size() > prefix_text.size() ? delta(new_text, prefix_text) : std::string();
}

}  // namespace nanovllm
