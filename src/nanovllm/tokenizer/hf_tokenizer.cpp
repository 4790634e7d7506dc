// Encode/decode pipeline of HfTokenizer (component parsing lives in the component files).
#include "nanovllm/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "nanovllm/tokenizer/byte_level.h"
#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {}  // namespace

struct HfTokenizer::EncodeState {
  PreTokenizer::Scratch pre;
  std::string normalized;
  std::vector<std::string_view> pieces;
};

HfTokenizer::HfTokenizer(const nlohmann::json& tokenizer, const nlohmann::json& config)
    : added_(tokenizer.value("added_tokens", nlohmann::json())),
      normalizer_(tokenizer.value("normalizer", nlohmann::json())),
      pre_tokenizer_(tokenizer.value("pre_tokenizer", nlohmann::json())),
      decoder_(tokenizer.value("decoder", nlohmann::json()), &byte_level_) {
  byte_level_ = byte_level_ || pre_tokenizer_.has_byte_level();
  if (!tokenizer.contains("model")) throw TokenizerError("tokenizer.json: no \"model\"");
  model_ = std::make_unique<BpeModel>(tokenizer["model"], byte_level_);

  vocab_size_ = model_->id_limit();
  for (const AddedToken& t : added_.tokens()) vocab_size_ = std::max(vocab_size_, t.id + 1);
  post_ = PostProcessor(tokenizer.value("post_processor", nlohmann::json()));
  for (const auto* ids : {&post_.prefix, &post_.suffix})
    for (const int32_t id : *ids)
      if (id >= vocab_size_)
        throw TokenizerError("tokenizer.json: post_processor adds token id " + std::to_string(id) +
                             ", outside the vocabulary of " + std::to_string(vocab_size_));
  read_config(config);
}

void HfTokenizer::read_config(const nlohmann::json& config) {
  if (!config.is_object()) return;
  if (config.contains("chat_template")) {
    const auto& ct = config["chat_template"];
    if (ct.is_string()) {
      chat_template_ = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": ..., "template": ...}]: take "default"
      for (const auto& entry : ct)
        if (entry.is_object() && entry.value("name", std::string()) == "default" && entry.contains("template") &&
            entry["template"].is_string())
          chat_template_ = entry["template"].get<std::string>();
    }
  }
  auto token = [&](const char* key) -> std::string {
    if (!config.contains(key)) return "";
    const auto& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return "";
  };
  bos_token_ = token("bos_token");
  eos_token_ = token("eos_token");
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  const size_t bad = utf8::find_invalid(text);
  if (bad != utf8::kValid) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[bad])));
    throw TokenizerError("invalid UTF-8 in input text at byte offset " + std::to_string(bad) + " (byte " + byte + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 1);
  EncodeState st;
  added_.raw().split(
      text, [&](std::string_view seg) { encode_segment(seg, seg.data() == text.data(), st, ids); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

void HfTokenizer::encode_segment(std::string_view raw, bool at_start, EncodeState& st,
                                 std::vector<int32_t>& ids) const {
  const std::string_view norm = normalizer_.apply(raw, st.normalized);
  if (added_.normalized().empty()) {
    encode_normalized(norm, at_start, st, ids);
    return;
  }
  added_.normalized().split(
      norm, [&](std::string_view seg) { encode_normalized(seg, at_start && seg.data() == norm.data(), st, ids); },
      [&](int32_t id) { ids.push_back(id); });
}

void HfTokenizer::encode_normalized(std::string_view text, bool at_start, EncodeState& st,
                                    std::vector<int32_t>& ids) const {
  st.pieces.clear();
  pre_tokenizer_.split(text, st.pre, st.pieces, at_start);
  for (std::string_view piece : st.pieces) model_->encode_word(piece, ids);
  st.pre.owned.clear();
}

void HfTokenizer::append_bytes(const int32_t* ids, size_t n, bool skip_special_tokens, std::string& out) const {
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (const AddedToken* t = added_.find(id)) {
      if (!(skip_special_tokens && t->special)) out += t->content;
    } else if (model_->has_id(id)) {
      out += model_->bytes_of(id);
    } else {
      throw TokenizerError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size_) +
                           ")");
    }
  }
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  if (!byte_level_) {  // token strings through the decoder chain (SentencePiece-style vocabularies)
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int32_t id : ids) {
      if (const AddedToken* t = added_.find(id)) {
        if (!(skip_special_tokens && t->special)) tokens.push_back(t->content);
      } else if (model_->has_id(id)) {
        tokens.push_back(model_->bytes_of(id));
      } else {
        throw TokenizerError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size_) +
                             ")");
      }
    }
    std::string text = decoder_.decode(std::move(tokens));
    if (utf8::find_invalid(text) == utf8::kValid) return text;
    std::string repaired;
    utf8::append_lossy(text, repaired);
    return repaired;
  }
  std::string bytes;
  append_bytes(ids.data(), ids.size(), skip_special_tokens, bytes);
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(bytes, text);
  return text;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.token_to_id(token)) return id;
  return model_->token_to_id(token);
}

std::string HfTokenizer::token_bytes(int32_t id) const {
  std::string out;
  append_bytes(&id, 1, false, out);
  if (byte_level_ || added_.find(id)) return out;
  // SentencePiece-style pieces: <0xHH> is one byte, U+2581 a space.
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  if (out.size() == 6 && out.compare(0, 3, "<0x") == 0 && out[5] == '>' && hex(out[3]) >= 0 && hex(out[4]) >= 0)
    return std::string(1, char(hex(out[3]) * 16 + hex(out[4])));
  std::string text;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 3, "\xE2\x96\x81") == 0) {
      text += ' ';
      i += 2;
    } else {
      text += out[i];
    }
  }
  return text;
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = added_.find(id)) return t->content;
  std::string bytes;
  append_bytes(&id, 1, false, bytes);  // throws for an id out of range
  return byte_level_ ? byte_level_table().to_text(bytes) : bytes;
}

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* t = added_.find(id);
  return t && t->special;
}

}  // namespace nanovllm
