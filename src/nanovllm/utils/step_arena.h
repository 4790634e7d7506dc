// Activation memory for one engine step (the CUDA backend's arena): a few large chunks from the
// device allocator, carved into blocks for the step's tensors. A block goes back to the free list
// as soon as its tensor is gone, so a step needs about its largest live set, not the sum of every
// temporary it made (a 16K-token prefill of Qwen3-8B makes ~70 GB of temporaries over 36 layers,
// and lives in ~3 GB at any moment). reset() at the start of a step frees every block at once:
// tensors of an earlier step are dead by contract, and their late releases are ignored (each block
// remembers its step's generation).
//
// Determinism, which CUDA graphs need: first fit over address-ordered free lists, so the same
// sequence of alloc/release calls after reset() gives the same addresses. A graph captured in one
// step replays in a later step with the same prefix of calls, writing the very blocks it was
// captured with; hold() re-marks the blocks a replay writes that outlive it (its outputs).
// Not thread-safe: one backend, one thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace nanovllm {

class StepArena {
 public:
  using Allocate = std::function<void*(size_t bytes)>;  // throws when out of memory
  using Free = std::function<void(void*)>;

  // Blocks are multiples of `align`; a new chunk is at least `min_chunk` and at least as large as
  // all chunks so far (growth doubles).
  StepArena(Allocate allocate, Free free, size_t align, size_t min_chunk);
  ~StepArena();
  StepArena(const StepArena&) = delete;
  StepArena& operator=(const StepArena&) = delete;

  // A block of at least `bytes`. With may_grow false (inside a graph capture) no chunk is added:
  // Error when no free block fits.
  void* alloc(size_t bytes, bool may_grow);
  // Returns the block at p, allocated in step `generation`; blocks of earlier steps are ignored.
  void release(void* p, uint64_t generation);
  // Start of a step: every block is free. With may_compact, several chunks are first replaced by
  // one of their total size (never while graphs exist: their addresses are baked in).
  void reset(bool may_compact);
  // Marks [p, p + bytes) as used until the next reset: it must be free, or be that very block.
  void hold(const void* p, size_t bytes);

  uint64_t generation() const { return generation_; }
  // Largest extent any step reached: over the chunks, the sum of the highest end offset used.
  size_t peak() const { return peak_; }
  size_t capacity() const;
  size_t live_bytes() const;                                  // in blocks not yet released this step
  std::vector<std::pair<void*, size_t>> used_blocks() const;  // (address, bytes) of those blocks

 private:
  struct Chunk {
    char* base = nullptr;
    size_t size = 0;
    std::map<size_t, size_t> free;  // offset -> length, address order, coalesced
    std::map<size_t, size_t> used;  // offset -> length
    size_t high = 0;                // highest end offset used this step
  };
  size_t round_up(size_t bytes) const;
  void add_chunk(size_t bytes);
  void free_all_chunks();
  bool take(Chunk& c, size_t off, size_t len);  // carves [off, off + len) out of a free block
  void note_extent();
  Chunk* chunk_of(const void* p);

  Allocate allocate_;
  Free free_;
  size_t align_, min_chunk_;
  std::vector<Chunk> chunks_;
  uint64_t generation_ = 1;
  size_t peak_ = 0;
};

}  // namespace nanovllm
