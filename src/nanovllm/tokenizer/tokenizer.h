// Hugging Face tokenizer.json (byte-level BPE: Qwen3, Qwen2.5, Llama 3; SentencePiece-style BPE with byte
// fallback: Llama 2, Mistral) plus tokenizer_config.json.
// Public interface used by the engine, CLI and server. Implementation: tokenizer/*.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

// Token ids above this are refused when a tokenizer.json is read (the largest vocabularies in use
// hold about 260K tokens): an id of 2^31 - 1 would otherwise ask for tables of that many entries.
inline constexpr int32_t kMaxTokenId = (1 << 22) - 1;

class Tokenizer {
 public:
  // Loads <dir>/tokenizer.json and <dir>/tokenizer_config.json (the latter optional: chat
  // template, bos/eos tokens). Throws TokenizerError naming the file and the problem.
  static std::unique_ptr<Tokenizer> from_dir(const std::string& dir);
  virtual ~Tokenizer() = default;

  // Text -> ids. Special/added tokens in the text are matched before pre-tokenization.
  // Invalid UTF-8 throws TokenizerError naming the byte offset. No BOS is added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The same, with add_special_tokens: the post-processor's special tokens around the ids (Llama
  // and Mistral: BOS in front; Qwen: none), as Hugging Face's encode(text) and vLLM's prompts.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const {
    std::vector<int32_t> ids = encode(text);
    if (add_special_tokens && !(special_prefix().empty() && special_suffix().empty())) {
      ids.insert(ids.begin(), special_prefix().begin(), special_prefix().end());
      ids.insert(ids.end(), special_suffix().begin(), special_suffix().end());
    }
    return ids;
  }
  virtual const std::vector<int32_t>& special_prefix() const = 0;
  virtual const std::vector<int32_t>& special_suffix() const = 0;
  // Ids -> text. Ids out of range throw TokenizerError.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  virtual int32_t vocab_size() const = 0;
  // The model's vocabulary without the added tokens (Hugging Face's `vocab_size`; vocab_size()
  // above is its len(tokenizer)).
  virtual int32_t base_vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // The bytes token `id` contributes to text in the middle of a sequence (what a grammar matches):
  // byte-level vocabularies' raw bytes, SentencePiece pieces with U+2581 as a space and <0xHH> as
  // the byte, added tokens' content. Ids out of range throw TokenizerError.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The token's string as tokenizer.json spells it ("Ġthe", "▁the", "<|im_end|>"): Hugging Face's
  // convert_ids_to_tokens, vLLM's /tokenize token_strs. Ids out of range throw TokenizerError.
  virtual std::string id_to_token(int32_t id) const = 0;
  // From tokenizer_config.json (empty when absent).
  virtual const std::string& chat_template() const = 0;
  virtual const std::string& bos_token() const = 0;
  virtual const std::string& eos_token() const = 0;
};

// Streaming detokenizer: push ids one at a time, get text deltas that never split a UTF-8
// character and whose concatenation equals decode(all ids).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);  // returns the new text (maybe empty)
  std::string flush();           // remaining text at the end of the stream
 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_..] are decoded each push
  size_t read_offset_ = 0;    // text of ids_[prefix_offset_..read_offset_) was already emitted
};

}  // namespace nanovllm
