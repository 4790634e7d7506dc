// Drafting backoff: a sequence whose drafts keep being rejected stops drafting for a while.
//
// A verify step costs more than a decode step (k + 1 rows through the decode kernels: on an H200,
// Qwen3-8B batch 1, k = 4, about 1.3x, bench/RESULTS.md), so drafts that never stand make decoding
// slower (0.76x at acceptance 0). Per sequence: after kZeroRun verify rows in a row where no draft
// stood, the sequence skips drafting for `next_skip` steps, then drafts once (a probe); a probe
// that is rejected too doubles the skip (up to kMaxSkip steps), any draft standing resets it. At
// acceptance 0 a sequence then verifies about once per kMaxSkip steps; at a per-token acceptance
// of 0.6 (k = 4: no draft stands in 40% of rows) about 1-3% of steps lose their drafts, at 0.7
// well under 1%. Outputs do not change (verification is lossless either way); only when drafts
// are asked for. Off with the speculative config's "backoff": false (and in bench
// --spec-acceptance's record and measured passes, which need every step to draft).
#pragma once
#include <algorithm>
#include <cstdint>

namespace nanovllm {

struct DraftBackoff {
  static constexpr int64_t kZeroRun = 4, kMaxSkip = 64;
  int64_t zero_run = 0;  // verify rows in a row where no draft stood
  int64_t skip = 0;      // steps left without drafts
  int64_t next_skip = 1;

  // A verify row of `drafted` drafts, `accepted` of which stood.
  void observe(int64_t accepted, int64_t drafted) {
    if (drafted <= 0) return;
    if (accepted > 0) {
      zero_run = 0;
      next_skip = 1;
      return;
    }
    if (++zero_run < kZeroRun) return;
    skip = next_skip;
    next_skip = std::min(2 * next_skip, kMaxSkip);
  }
  // Called once per step the sequence could draft in: false while it skips (the step is counted).
  bool should_draft() {
    if (skip <= 0) return true;
    --skip;
    return false;
  }
};

}  // namespace nanovllm
