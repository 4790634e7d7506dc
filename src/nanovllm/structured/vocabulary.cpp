#include "nanovllm/structured/vocabulary.h"

#include <algorithm>

#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::structured {

Vocabulary vocabulary_from_tokenizer(const Tokenizer& tok, int32_t size, std::vector<int32_t> stop_ids) {
  Vocabulary v;
  const int32_t n = size;
  v.bytes.resize(size_t(n));
  v.matchable.assign(size_t(n), 0);
  for (int32_t t = 0; t < std::min(n, tok.vocab_size()); ++t) {
    try {
      v.bytes[size_t(t)] = tok.token_bytes(t);
    } catch (const Error&) {
      continue;  // a hole in the id space: never matchable
    }
    v.matchable[size_t(t)] = !tok.is_special(t) && !v.bytes[size_t(t)].empty();
  }
  for (int32_t t : stop_ids)
    if (t >= 0 && t < n) v.matchable[size_t(t)] = 0;
  v.stop_ids = std::move(stop_ids);
  return v;
}

}  // namespace nanovllm::structured
