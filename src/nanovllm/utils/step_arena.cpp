#include "nanovllm/utils/step_arena.h"

#include <algorithm>

#include "nanovllm/utils/error.h"

namespace nanovllm {

StepArena::StepArena(Allocate allocate, Free free, size_t align, size_t min_chunk)
    : allocate_(std::move(allocate)), free_(std::move(free)), align_(std::max<size_t>(align, 1)),
      min_chunk_(min_chunk) {}

StepArena::~StepArena() { free_all_chunks(); }

size_t StepArena::round_up(size_t bytes) const {
  bytes = std::max<size_t>(bytes, 1);
  return (bytes + align_ - 1) / align_ * align_;
}

size_t StepArena::capacity() const {
  size_t total = 0;
  for (auto& c : chunks_) total += c.size;
  return total;
}

size_t StepArena::live_bytes() const {
  size_t total = 0;
  for (auto& c : chunks_)
    for (auto& [off, len] : c.used) total += len;
  return total;
}

std::vector<std::pair<void*, size_t>> StepArena::used_blocks() const {
  std::vector<std::pair<void*, size_t>> out;
  for (auto& c : chunks_)
    for (auto& [off, len] : c.used) out.emplace_back(c.base + off, len);
  return out;
}

void StepArena::add_chunk(size_t bytes) {
  Chunk c;
  c.size = round_up(bytes);
  c.base = static_cast<char*>(allocate_(c.size));  // throws when out of memory
  c.free[0] = c.size;
  chunks_.push_back(std::move(c));
}

void StepArena::free_all_chunks() {
  for (auto& c : chunks_) free_(c.base);
  chunks_.clear();
}

bool StepArena::take(Chunk& c, size_t off, size_t len) {
  auto it = c.free.upper_bound(off);
  if (it == c.free.begin()) return false;
  --it;  // the free block starting at or before off
  const size_t fo = it->first, fl = it->second;
  if (off + len > fo + fl) return false;
  c.free.erase(it);
  if (off > fo) c.free[fo] = off - fo;
  if (off + len < fo + fl) c.free[off + len] = fo + fl - (off + len);
  c.used[off] = len;
  c.high = std::max(c.high, off + len);
  return true;
}

void StepArena::note_extent() {
  size_t extent = 0;
  for (auto& c : chunks_) extent += c.high;
  peak_ = std::max(peak_, extent);
}

void* StepArena::alloc(size_t bytes, bool may_grow) {
  const size_t len = round_up(bytes);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& c : chunks_)
      for (auto& [off, flen] : c.free)
        if (flen >= len) {
          const size_t o = off;  // take() invalidates the iterator
          take(c, o, len);
          note_extent();
          return c.base + o;
        }
    if (attempt == 1) break;
    if (!may_grow)
      throw Error("step arena: no free block of " + std::to_string(len) + " bytes and the arena may not grow now (" +
                  std::to_string(live_bytes()) + " of " + std::to_string(capacity()) +
                  " bytes live); inside a CUDA graph capture, run a warm-up step of the same shape first");
    add_chunk(std::max({len, min_chunk_, capacity()}));
  }
  throw Error("step arena: a new chunk did not fit " + std::to_string(len) + " bytes");
}

StepArena::Chunk* StepArena::chunk_of(const void* p) {
  const char* q = static_cast<const char*>(p);
  for (auto& c : chunks_)
    if (q >= c.base && q < c.base + c.size) return &c;
  return nullptr;
}

void StepArena::release(void* p, uint64_t generation) {
  if (generation != generation_) return;  // reset() reclaimed it already
  Chunk* c = chunk_of(p);
  if (!c) return;
  const size_t off = size_t(static_cast<char*>(p) - c->base);
  auto u = c->used.find(off);
  if (u == c->used.end()) return;
  size_t start = off, len = u->second;
  c->used.erase(u);
  // Coalesce with the free neighbours.
  auto next = c->free.lower_bound(start);
  if (next != c->free.end() && next->first == start + len) {
    len += next->second;
    next = c->free.erase(next);
  }
  if (next != c->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      c->free.erase(prev);
    }
  }
  c->free[start] = len;
}

void StepArena::reset(bool may_compact) {
  ++generation_;
  if (may_compact && chunks_.size() > 1) {
    const size_t total = capacity();
    free_all_chunks();
    add_chunk(total);
  }
  for (auto& c : chunks_) {
    c.free.clear();
    c.used.clear();
    c.free[0] = c.size;
    c.high = 0;
  }
}

void StepArena::hold(const void* p, size_t bytes) {
  Chunk* c = chunk_of(p);
  const size_t len = round_up(bytes);
  if (c) {  // already this very block (a replay in the step that captured it): nothing to do
    auto u = c->used.find(size_t(static_cast<const char*>(p) - c->base));
    if (u != c->used.end() && u->second == len) return;
  }
  if (!c || !take(*c, size_t(static_cast<const char*>(p) - c->base), len))
    throw Error("step arena: cannot hold " + std::to_string(len) + " bytes at an address that is " +
                (c ? "already in use" : "outside the arena") + " (a CUDA graph's output overlaps this step's tensors)");
  note_extent();
}

}  // namespace nanovllm
