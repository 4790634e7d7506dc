// BPE merge loop. Short words (the vast majority) use a flat array of symbols with the rank of each
// adjacent pair, updated locally after every merge; long words use a min-heap over (rank, position)
// with lazy invalidation, so a 1 MB word costs O(n log n), not O(n^2).
#include "nanovllm/tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>

#include "nanovllm/tokenizer/byte_level.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "nanovllm/tokenizer/utf8.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void MergeTable::build(const std::vector<std::pair<uint64_t, Merge>>& entries) {
  size_t cap = 16;
  while (cap < entries.size() * 2) cap <<= 1;
  keys_.assign(cap, kEmpty);
  vals_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
  shift_ = 64 - std::countr_zero(cap);
  for (const auto& [key, merge] : entries) {
    size_t i = slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    if (keys_[i] == key) continue;  // duplicate merge: the first (lowest rank) wins
    keys_[i] = key;
    vals_[i] = merge;
  }
}

BpeModel::BpeModel(const nlohmann::json& model, bool byte_level) : byte_level_(byte_level) {
  if (!model.is_object()) throw TokenizerError("tokenizer.json: \"model\" is missing or not an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") throw TokenizerError("tokenizer.json: unsupported model type '" + type + "'");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw TokenizerError("tokenizer.json: BPE model without a \"vocab\" object");
  if (model["vocab"].empty())  // Hugging Face loads it, then drops all text: surely a broken file
    throw TokenizerError("tokenizer.json: BPE model with an empty \"vocab\"");
  if (!model.contains("merges") || !model["merges"].is_array())
    throw TokenizerError("tokenizer.json: BPE model without a \"merges\" array");
  auto nonempty_string = [&](const char* key) {
    return model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty();
  };
  if (nonempty_string("continuing_subword_prefix") || nonempty_string("end_of_word_suffix"))
    throw TokenizerError("tokenizer.json: BPE subword prefixes/suffixes are not supported");
  byte_fallback_ = model.value("byte_fallback", false);
  fuse_unk_ = model.value("fuse_unk", false);
  if (byte_fallback_ && byte_level_)
    throw TokenizerError("tokenizer.json: BPE byte_fallback with a byte-level vocabulary is not supported");
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0)
    throw TokenizerError("tokenizer.json: BPE dropout is not supported");
  ignore_merges_ = model.value("ignore_merges", false);

  // Vocabulary: translate byte-level strings to raw bytes once.
  const ByteLevelTable& table = byte_level_table();
  int32_t max_id = -1;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0)
      throw TokenizerError("tokenizer.json: vocab entry '" + token + "' has an invalid id");
    if (id_json.get<int64_t>() > kMaxTokenId)
      throw TokenizerError("tokenizer.json: vocab entry '" + token + "' has id " + id_json.dump() +
                           ", above the supported " + std::to_string(kMaxTokenId));
    max_id = std::max(max_id, id_json.get<int32_t>());
  }
  id_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  present_.assign(static_cast<size_t>(max_id + 1), false);
  vocab_.reserve(model["vocab"].size());
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const auto id = id_json.get<int32_t>();
    std::optional<std::string> bytes = byte_level_ ? table.to_bytes(token) : std::optional<std::string>(token);
    present_[id] = true;
    if (!bytes) {
      unmappable_.emplace(token, id);
      id_bytes_[id] = token;
      continue;
    }
    id_bytes_[id] = *bytes;
    vocab_.emplace(std::move(*bytes), id);
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    // Byte-level: the byte itself; byte fallback: the SentencePiece token "<0xAB>".
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = byte_level_ ? vocab_.find(std::string(1, static_cast<char>(b))) : vocab_.find(name);
    if (it != vocab_.end()) byte_ids_[b] = it->second;
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab_.find(model["unk_token"].get<std::string>());
    if (it != vocab_.end()) unk_id_ = it->second;
  }

  // Merges: "a b" strings (older files) or ["a", "b"] pairs; rank = position in the list.
  const auto& merges = model["merges"];
  std::vector<std::pair<uint64_t, MergeTable::Merge>> entries;
  entries.reserve(merges.size());
  auto id_of = [&](const std::string& s, size_t rank) -> int32_t {
    auto bytes = byte_level_ ? table.to_bytes(s) : std::optional<std::string>(s);
    auto it = bytes ? vocab_.find(*bytes) : vocab_.end();
    if (it == vocab_.end())
      throw TokenizerError("tokenizer.json: merge #" + std::to_string(rank) + " uses '" + s +
                           "', which is not in the vocab");
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw TokenizerError("tokenizer.json: merge #" + std::to_string(rank) + " '" + s + "' is not \"a b\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw TokenizerError("tokenizer.json: merge #" + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    const int32_t ia = id_of(a, rank), ib = id_of(b, rank), im = id_of(a + b, rank);
    entries.emplace_back(MergeTable::pack(ia, ib), MergeTable::Merge{static_cast<int32_t>(rank), im});
  }
  merges_.build(entries);
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  std::optional<std::string> bytes =
      byte_level_ ? byte_level_table().to_bytes(token) : std::optional<std::string>(std::string(token));
  if (bytes) {
    auto it = vocab_.find(*bytes);
    if (it != vocab_.end()) return it->second;
  }
  auto it = unmappable_.find(std::string(token));
  if (it != unmappable_.end()) return it->second;
  return std::nullopt;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  if (byte_level_) {
    for (char c : word) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0)
        syms.push_back(id);
      else if (unk_id_)
        syms.push_back(*unk_id_);
    }
    return;
  }
  // Characters; one missing from the vocabulary becomes its bytes' "<0xAB>" tokens (byte_fallback,
  // when all of them exist), else the unknown token (consecutive ones fused into one with fuse_unk).
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    size_t n = utf8::sequence_length(word, i);
    if (n == 0) n = 1;
    const std::string_view ch = word.substr(i, n);
    i += n;
    auto it = vocab_.find(std::string(ch));
    if (it != vocab_.end()) {
      syms.push_back(it->second);
      last_unk = false;
      continue;
    }
    if (byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[uint8_t(c)] >= 0; })) {
      for (char c : ch) syms.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      last_unk = false;
      continue;
    }
    if (unk_id_ && !(fuse_unk_ && last_unk)) syms.push_back(*unk_id_);
    last_unk = unk_id_.has_value();
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_level_ && byte_ids_[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (cache_.lookup(word, out)) return;
  if (ignore_merges_) {  // Llama 3: a piece that is a whole vocabulary entry is taken as is
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      cache_.insert(word, &it->second, 1);
      return;
    }
  }
  std::vector<int32_t> syms;
  syms.reserve(word.size());
  initial_symbols(word, syms);
  if (syms.size() <= 64)
    merge_small(syms);
  else
    merge_large(syms);
  cache_.insert(word, syms.data(), syms.size());
  out.insert(out.end(), syms.begin(), syms.end());
}

void BpeModel::merge_small(std::vector<int32_t>& syms) const {
  // rank[i] is the rank of the pair (syms[i], syms[i+1]), INT_MAX if it does not merge.
  int32_t rank[64], merged[64];
  size_t n = syms.size();
  auto score = [&](size_t i) {
    const MergeTable::Merge* m = merges_.find(syms[i], syms[i + 1]);
    rank[i] = m ? m->rank : INT_MAX;
    merged[i] = m ? m->id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) score(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT_MAX) break;
    syms[best] = merged[best];
    // Remove symbol best+1 and the pair that started there.
    for (size_t i = best + 1; i + 1 < n; ++i) {
      syms[i] = syms[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) score(best - 1);
    if (best + 1 < n) score(best);
  }
  syms.resize(n);
}

void BpeModel::merge_large(std::vector<int32_t>& syms) const {
  struct Node {
    int32_t id, prev, next;
  };
  struct Cand {
    int32_t rank, pos, left, right, merged;
  };
  auto later = [](const Cand& x, const Cand& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
  const auto n = static_cast<int32_t>(syms.size());
  std::vector<Node> nodes(syms.size());
  std::vector<Cand> heap;
  auto push = [&](int32_t pos) {
    const Node& l = nodes[pos];
    if (l.next < 0) return;
    const int32_t right = nodes[l.next].id;
    if (const MergeTable::Merge* m = merges_.find(l.id, right)) {
      heap.push_back({m->rank, pos, l.id, right, m->id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i < n; ++i) nodes[i] = {syms[i], i - 1, i + 1 < n ? i + 1 : -1};
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Cand c = heap.back();
    heap.pop_back();
    Node& l = nodes[c.pos];
    // Stale candidate: either side has changed since it was pushed (ids only ever grow longer).
    if (l.id != c.left || l.next < 0 || nodes[l.next].id != c.right) continue;
    const int32_t r = l.next;
    l.id = c.merged;
    l.next = nodes[r].next;
    if (l.next >= 0) nodes[l.next].prev = c.pos;
    nodes[r].id = -1;
    if (l.prev >= 0) push(l.prev);
    push(c.pos);
  }
  syms.clear();
  for (int32_t i = 0; i >= 0; i = nodes[i].next) syms.push_back(nodes[i].id);
}

}  // namespace nanovllm
