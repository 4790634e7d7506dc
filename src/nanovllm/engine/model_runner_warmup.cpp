// Start-up warm-up of the mixed steps a server meets (--target-itl-ms on): a fresh server's first
// long prompt otherwise runs its chunks beside the decoding streams at row counts no step has had,
// and each first use of a GEMM row bucket (cuBLASLt's heuristic query, the first launch of the
// kernel it picks) or a paged-prefill attention shape costs that step tens of milliseconds: one
// inter-token gap of 100-170 ms per fresh server in issue 44's interference scenario
// (bench/RESULTS.md). bench --interference met them in its own warm-up; a server meets them here.
//
// One step per row class of Backend::plan_row_counts (the CUDA backend: the top of each heuristic
// bucket, ~40 classes up to 16K rows): D decode rows of short context plus one prompt chunk of
// T - D tokens after as many cached tokens (the later-chunk attention path), up to the row counts a
// step can have beside decodes under the target: T x (the warm-up step's seconds per token, a cold
// overestimate) <= 3 x the target. The values are zeros in blocks nobody holds yet (no prefix cache
// entry exists before the first request). Every rank of a tensor-parallel group runs the same
// steps (the count agreed as the minimum over ranks: timings differ).
#include "nanovllm/engine/model_runner.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "nanovllm/dist/tp_group.h"
#include "nanovllm/engine/sequence.h"

namespace nanovllm {

void ModelRunner::warm_up_mixed_steps() {
  const int64_t bs = cfg_.block_size;
  const int64_t D = std::min<int64_t>(8, cfg_.max_num_seqs - 1);  // decode rows beside the chunk
  const double limit = 3 * cfg_.target_itl_ms * 1e-3;
  std::vector<int64_t> rows;
  for (int64_t T : backend_->plan_row_counts(cfg_.max_num_batched_tokens)) {
    const int64_t chunk = T - std::max<int64_t>(D, 0);
    // The chunk and as many cached tokens before it, plus one block for the decode rows.
    const int64_t blocks = (2 * chunk + bs - 1) / bs + 1;
    if (chunk < 1 || 2 * chunk > cfg_.max_model_len || blocks > num_kv_blocks_) continue;
    if (warmup_seconds_per_token_ > 0 && double(T) * warmup_seconds_per_token_ > limit) break;
    rows.push_back(T);
  }
  int64_t steps = int64_t(rows.size());
  if (tp_) steps = tp_->all_min(steps);
  if (steps == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  SamplingParams greedy;
  greedy.temperature = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t T = rows[size_t(i)], chunk = T - std::max<int64_t>(D, 0);
    std::vector<std::unique_ptr<Sequence>> seqs;
    ScheduledBatch batch;
    batch.is_prefill = true;
    // The prompt: `chunk` cached tokens, then the chunk this step computes.
    seqs.push_back(std::make_unique<Sequence>(-1, std::vector<int32_t>(size_t(2 * chunk), 0), greedy, bs, 0));
    Sequence& p = *seqs.back();
    for (int64_t b = 0; b < (2 * chunk + bs - 1) / bs; ++b) p.block_table.push_back(int32_t(b));
    p.num_cached_tokens = chunk;
    p.num_scheduled_tokens = chunk;
    const int32_t decode_block = int32_t(p.block_table.size());
    for (int64_t d = 0; d < D; ++d) {  // decode rows: the last of 16 tokens, all in one shared block
      seqs.push_back(std::make_unique<Sequence>(-2 - d, std::vector<int32_t>(16, 0), greedy, bs, 0));
      seqs.back()->block_table.push_back(decode_block);
      seqs.back()->num_cached_tokens = 15;
      seqs.back()->num_scheduled_tokens = 1;
    }
    for (auto& s : seqs) {
      batch.seqs.push_back(s.get());
      batch.num_tokens += s->num_scheduled_tokens;
    }
    batch.num_prefill_tokens = chunk;
    StepInputs in = prepare(batch, bs);
    forward_and_sample(batch, in);
  }
  backend_->synchronize();
  note("warm-up of " + std::to_string(steps) + " mixed-step shapes (up to " + std::to_string(rows[size_t(steps - 1)]) +
       " tokens): " +
       std::to_string(int64_t(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3)) +
       " ms");
}

}  // namespace nanovllm
