// The Tokenizer implementation for Hugging Face tokenizer.json files:
//   raw text -> added tokens (normalized=false) -> normalizer -> added tokens (normalized=true)
//   -> pre-tokenizer pieces -> BPE ids.
// Decoding of byte-level vocabularies concatenates token bytes (added tokens as their content) and
// repairs invalid UTF-8 with U+FFFD, as Hugging Face's ByteLevel decoder does; other vocabularies
// (SentencePiece-style BPE with byte fallback: Llama 2, Mistral) go through TokenDecoder's chain.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/added_tokens.h"
#include "nanovllm/tokenizer/bpe_model.h"
#include "nanovllm/tokenizer/decoder.h"
#include "nanovllm/tokenizer/normalizer.h"
#include "nanovllm/tokenizer/post_processor.h"
#include "nanovllm/tokenizer/pre_tokenizer.h"
#include "nanovllm/tokenizer/tokenizer.h"

namespace nanovllm {

class HfTokenizer final : public Tokenizer {
 public:
  // `tokenizer` is the parsed tokenizer.json, `config` the parsed tokenizer_config.json (or null).
  HfTokenizer(const nlohmann::json& tokenizer, const nlohmann::json& config);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text) const override;
  const std::vector<int32_t>& special_prefix() const override { return post_.prefix; }
  const std::vector<int32_t>& special_suffix() const override { return post_.suffix; }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t base_vocab_size() const override { return model_->id_limit(); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  bool is_special(int32_t id) const override;
  std::string token_bytes(int32_t id) const override;
  std::string id_to_token(int32_t id) const override;
  const std::string& chat_template() const override { return chat_template_; }
  const std::string& bos_token() const override { return bos_token_; }
  const std::string& eos_token() const override { return eos_token_; }

  // Raw bytes of ids[begin, end) before UTF-8 repair (used by the streaming detokenizer).
  void append_bytes(const int32_t* ids, size_t n, bool skip_special_tokens, std::string& out) const;

 private:
  struct EncodeState;
  // at_start: the text begins at offset 0 of what encode() was given (Metaspace's "first" scheme).
  void encode_segment(std::string_view raw, bool at_start, EncodeState& st, std::vector<int32_t>& ids) const;
  void encode_normalized(std::string_view text, bool at_start, EncodeState& st, std::vector<int32_t>& ids) const;
  void read_config(const nlohmann::json& config);

  AddedVocabulary added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  bool byte_level_ = false;  // set by decoder_'s constructor (a ByteLevel step) or the pre-tokenizer
  TokenDecoder decoder_;
  std::unique_ptr<BpeModel> model_;
  PostProcessor post_;
  int32_t vocab_size_ = 0;
  std::string chat_template_, bos_token_, eos_token_;
};

// Parses tokenizer.json text (and tokenizer_config.json text, empty when absent); for tests and
// fuzzing. Throws TokenizerError.
std::unique_ptr<Tokenizer> tokenizer_from_json(const std::string& tokenizer_json, const std::string& config_json);

}  // namespace nanovllm
