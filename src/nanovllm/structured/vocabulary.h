// The model's tokens as byte strings: what a grammar matches token by token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm::structured {

struct Vocabulary {
  // bytes[t] is token t's text as raw bytes (byte-level BPE decoded, byte-fallback <0xHH> tokens as
  // their byte, added non-special tokens as their content). One entry per logit (the model's
  // vocab_size, padding included). A token with matchable[t] == 0 (special tokens, padding, empty
  // strings) is never allowed by a grammar; stop ids are handled apart.
  std::vector<std::string> bytes;
  std::vector<uint8_t> matchable;
  // The model's EOS ids: allowed exactly when the grammar can end, and then the only way out of a
  // grammar that admits no more text.
  std::vector<int32_t> stop_ids;

  int32_t size() const { return int32_t(bytes.size()); }
  // 32-bit words of a token bitmask: bit (t % 32) of word t / 32 is token t.
  size_t mask_words() const { return (bytes.size() + 31) / 32; }
};

}  // namespace nanovllm::structured

namespace nanovllm {
class Tokenizer;
}

namespace nanovllm::structured {

// The vocabulary of `tok` over the model's logits width `size` (ids past the tokenizer are never
// matchable; tokenizer ids past `size` cannot be sampled and are left out); special tokens and
// `stop_ids` (the model's EOS ids) are not matchable.
Vocabulary vocabulary_from_tokenizer(const Tokenizer& tok, int32_t size, std::vector<int32_t> stop_ids);

}  // namespace nanovllm::structured
