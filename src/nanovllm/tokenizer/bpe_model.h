// tokenizer.json "model" of type BPE: vocabulary + ranked merges. Words are encoded by repeatedly
// applying the lowest-ranked merge among adjacent symbols (leftmost first on ties), exactly like
// Hugging Face tokenizers. For byte-level vocabularies we work on raw bytes: vocabulary strings are
// translated through the GPT-2 table once at load time.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/tokenizer/word_cache.h"

namespace nanovllm {

// Open-addressing map (a, b) -> (rank, merged id): the hot lookup of the merge loop.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void build(const std::vector<std::pair<uint64_t, Merge>>& entries);
  const Merge* find(int32_t a, int32_t b) const {
    const uint64_t key = pack(a, b);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint64_t> keys_;
  std::vector<Merge> vals_;
  size_t mask_ = 0;
  int shift_ = 64;
};

class BpeModel {
 public:
  // `model` is tokenizer.json's "model"; `byte_level` says whether the vocabulary is byte-level
  // encoded (a ByteLevel pre-tokenizer or decoder is present). Throws TokenizerError.
  BpeModel(const nlohmann::json& model, bool byte_level);

  // Appends the ids of one pre-tokenized piece (raw bytes, valid UTF-8 not required).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Id of a vocabulary string as written in tokenizer.json ("Ġthe").
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Raw bytes of a token (what decoding emits) and its tokenizer.json spelling.
  const std::string& bytes_of(int32_t id) const { return id_bytes_[id]; }
  // One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_bytes_.size()); }
  bool has_id(int32_t id) const { return id >= 0 && id < id_limit() && present_[id]; }

 private:
  void merge_small(std::vector<int32_t>& syms) const;
  void merge_large(std::vector<int32_t>& syms) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& syms) const;

  bool byte_level_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;  // unknown characters as "<0xAB>" byte tokens (SentencePiece BPE)
  bool fuse_unk_ = false;       // consecutive unknown characters give one unknown token
  std::optional<int32_t> unk_id_;
  std::unordered_map<std::string, int32_t> vocab_;       // raw bytes (or text) -> id
  std::unordered_map<std::string, int32_t> unmappable_;  // byte-level strings outside the table
  std::vector<std::string> id_bytes_;
  std::vector<bool> present_;
  std::array<int32_t, 256> byte_ids_{};  // id of each byte (byte-level: the byte; byte_fallback: "<0xAB>"), or -1
  MergeTable merges_;
  WordCache cache_;
};

}  // namespace nanovllm
