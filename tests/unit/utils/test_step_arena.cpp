// StepArena (the CUDA backend's step memory) over host malloc: blocks are reused once released,
// neighbours coalesce, a step's layout is the same every step (CUDA graphs), late releases of an
// earlier step are ignored, growth and compaction, hold() of a replayed graph's outputs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/step_arena.h"

using namespace nanovllm;

namespace {

struct Host {
  std::set<void*> live;  // chunks handed out and not freed
  StepArena make(size_t min_chunk = 1 << 20) {
    return StepArena(
        [this](size_t n) {
          void* p = std::malloc(n);
          live.insert(p);
          return p;
        },
        [this](void* p) {
          live.erase(p);
          std::free(p);
        },
        256, min_chunk);
  }
};

TEST(StepArena, ReleasedBlocksAreReusedAndCoalesce) {
  Host h;
  StepArena a = h.make();
  a.reset(true);
  const uint64_t g = a.generation();
  char* x = static_cast<char*>(a.alloc(1000, true));  // 1024 bytes
  char* y = static_cast<char*>(a.alloc(1000, true));
  char* z = static_cast<char*>(a.alloc(1000, true));
  EXPECT_EQ(y, x + 1024);
  EXPECT_EQ(z, y + 1024);
  a.release(y, g);
  EXPECT_EQ(a.alloc(500, true), y) << "first fit takes the hole";
  a.release(y, g);
  a.release(x, g);  // x and y coalesce: a 2048-byte hole
  EXPECT_EQ(a.alloc(2000, true), x);
  EXPECT_EQ(a.live_bytes(), 2048u + 1024u);
  EXPECT_EQ(a.peak(), 3072u);
}

TEST(StepArena, PeakIsTheLiveSetNotTheSumOfTemporaries) {
  Host h;
  StepArena a = h.make();
  a.reset(true);
  const uint64_t g = a.generation();
  void* keep = a.alloc(4096, true);
  for (int layer = 0; layer < 100; ++layer) {  // each layer: two temporaries, then both dropped
    void* t1 = a.alloc(10000, true);
    void* t2 = a.alloc(20000, true);
    a.release(t1, g);
    a.release(t2, g);
  }
  EXPECT_LE(a.peak(), 4096u + 10240u + 20224u);
  EXPECT_EQ(a.capacity(), size_t(1) << 20) << "one chunk was enough";
  a.release(keep, g);
  EXPECT_EQ(a.live_bytes(), 0u);
}

TEST(StepArena, SameCallsGiveSameAddressesEveryStep) {
  Host h;
  StepArena a = h.make(1 << 16);
  std::vector<void*> first;
  for (int step = 0; step < 3; ++step) {
    a.reset(true);
    const uint64_t g = a.generation();
    std::mt19937 rng(7);  // the same sequence of calls each step
    std::vector<void*> got, live;
    for (int i = 0; i < 200; ++i) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        a.release(live[k], g);
        live.erase(live.begin() + long(k));
      } else {
        live.push_back(a.alloc(1 + rng() % 5000, true));
        got.push_back(live.back());
      }
    }
    // Step 0 grew the arena and step 1 merged its chunks; from then on the layout is fixed.
    if (step == 1) first = got;
    if (step == 2) EXPECT_EQ(got, first);
    // No two live blocks overlap.
    std::set<std::pair<char*, char*>> spans;
    for (void* p : live) spans.insert({static_cast<char*>(p), static_cast<char*>(p) + 1});
    EXPECT_EQ(spans.size(), live.size());
  }
}

TEST(StepArena, LateReleaseOfAnEarlierStepIsIgnored) {
  Host h;
  StepArena a = h.make();
  a.reset(true);
  void* old = a.alloc(1000, true);
  const uint64_t g_old = a.generation();
  a.reset(true);
  void* now = a.alloc(1000, true);
  EXPECT_EQ(now, old);    // the same block, now owned by this step
  a.release(old, g_old);  // the earlier step's tensor dies late: must not free the new block
  EXPECT_EQ(a.live_bytes(), 1024u);
  EXPECT_NE(a.alloc(1000, true), now);
}

TEST(StepArena, GrowsThenCompactsIntoOneChunk) {
  Host h;
  StepArena a = h.make(1 << 16);
  a.reset(true);
  void* p = a.alloc(1 << 15, true);
  void* q = a.alloc(1 << 16, true);  // does not fit the first chunk: a second one
  EXPECT_NE(p, nullptr);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(h.live.size(), 2u);
  a.reset(/*may_compact=*/false);
  EXPECT_EQ(h.live.size(), 2u) << "no compaction while graphs exist";
  a.reset(/*may_compact=*/true);
  EXPECT_EQ(h.live.size(), 1u);
  EXPECT_GE(a.capacity(), size_t(3) << 15);
  a.alloc(1 << 15, true);
  a.alloc(1 << 16, true);
  EXPECT_EQ(h.live.size(), 1u) << "the merged chunk holds the same step";
}

TEST(StepArena, NoGrowthDuringCaptureIsAClearError) {
  Host h;
  StepArena a = h.make(1 << 16);
  a.reset(true);
  a.alloc(1 << 15, true);
  try {
    a.alloc(1 << 16, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("may not grow"), std::string::npos) << e.what();
  }
}

TEST(StepArena, HoldMarksAReplayedGraphsOutput) {
  Host h;
  StepArena a = h.make();
  a.reset(true);
  const uint64_t g = a.generation();
  void* tmp = a.alloc(4096, true);
  void* out = a.alloc(2048, true);  // the graph's output, kept by its caller
  a.release(tmp, g);
  const auto outputs = a.used_blocks();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].first, out);
  a.reset(true);  // a later step replays the graph: its output block is held, others avoid it
  for (auto& [p, n] : outputs) a.hold(p, n);
  void* next = a.alloc(8192, true);
  EXPECT_TRUE(static_cast<char*>(next) >= static_cast<char*>(out) + 2048 ||
              static_cast<char*>(next) + 8192 <= static_cast<char*>(out));
  a.hold(out, 2048);  // the same block again (a second replay in one step): no-op
  EXPECT_THROW(a.hold(static_cast<char*>(out) + 1024, 2048), Error) << "overlaps a block in use";
  int outside = 0;
  EXPECT_THROW(a.hold(&outside, 4), Error);
}

TEST(StepArena, FreesItsChunks) {
  Host h;
  {
    StepArena a = h.make();
    a.reset(true);
    a.alloc(100, true);
    EXPECT_EQ(h.live.size(), 1u);
  }
  EXPECT_TRUE(h.live.empty());
}

}  // namespace
