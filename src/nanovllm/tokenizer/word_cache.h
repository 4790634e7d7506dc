// Thread-safe cache of piece -> token ids for the BPE model. encode() is const and may run on many
// threads at once, so the cache is split into shards, each behind its own mutex; a shard that
// fills up is simply cleared (cheap, and keeps memory bounded).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nanovllm {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 128;  // longer pieces are rare and not worth caching
  explicit WordCache(size_t capacity = 1 << 16) : per_shard_(capacity / kShards + 1) {}

  // Appends the cached ids of `word` to `out`; false when absent.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t n) const;

 private:
  static constexpr size_t kShards = 16;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard_of(size_t hash) const { return shards_[(hash >> 7) % kShards]; }

  size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

inline bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  Shard& s = shard_of(Hash{}(word));
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(word);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

inline void WordCache::insert(std::string_view word, const int32_t* ids, size_t n) const {
  if (word.size() > kMaxWordBytes) return;
  Shard& s = shard_of(Hash{}(word));
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.map.size() >= per_shard_) s.map.clear();
  s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
}

}  // namespace nanovllm
