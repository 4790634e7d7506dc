// Token embedding and LM head. The head computes logits only for the last token of each
// sequence (rows picked by gather_rows), since only those are sampled. With tied embeddings the
// head's weight is the embedding table itself.
// Tensor parallelism (nano-vllm's VocabParallelEmbedding / ParallelLMHead): rank r holds the
// vocabulary rows [r * V/N, (r + 1) * V/N). The embedding looks up the ids in its range (zero
// rows for the others) and all-reduces; the head computes its [B, V/N] slice of the logits,
// all-gathers [N, B, V/N] and merges it to [B, V]. comm == nullptr: one rank, no collectives.
#pragma once
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/communicator.h"

namespace nanovllm {

struct VocabEmbedding {
  Tensor weight;            // [V/N, H]
  int64_t vocab_start = 0;  // first token id of this rank's rows
  Communicator* comm = nullptr;

  void create(Backend& be, int64_t vocab_rows, int64_t hidden) {
    weight = be.empty({vocab_rows, hidden}, be.weight_dtype());
  }
  // ids: [T] I32 -> [T, H]
  Tensor forward(Backend& be, const Tensor& ids) const {
    Tensor out = be.empty({ids.size(0), weight.size(1)}, be.act_dtype());
    be.embedding(ids, weight, out, vocab_start);
    if (comm) comm->all_reduce_sum(out);
    return out;
  }
};

// rows is [0, n): every row of an n-row tensor, in order (nothing to gather).
inline bool all_rows_in_order(const std::vector<int32_t>& rows, int64_t n) {
  bool all = int64_t(rows.size()) == n;
  for (size_t i = 0; all && i < rows.size(); ++i) all = rows[i] == int32_t(i);
  return all;
}

struct LMHead {
  Tensor weight;               // [V/N, H]: values, or codes with weight_scales
  WeightScales weight_scales;  // quantized (--quantization int8, models/quantize_weights.cpp); else undefined
  Communicator* comm = nullptr;

  // hidden: [T, H]; last_rows: [B] row of each sequence's last token -> logits [B, V]
  Tensor forward(Backend& be, const Tensor& hidden, const std::vector<int32_t>& last_rows) const {
    // Decode: every row is a last token, so no gather (and nothing host-dependent to capture).
    Tensor last = hidden;
    if (!all_rows_in_order(last_rows, hidden.size(0))) {
      last = be.empty({int64_t(last_rows.size()), hidden.size(1)}, hidden.dtype());
      be.gather_rows(hidden, last_rows, last);
    }
    const int64_t B = last.size(0), Vl = weight.size(0);
    Tensor logits = be.empty({B, Vl}, be.act_dtype());
    be.linear(last, weight, weight_scales, logits);
    if (!comm) return logits;
    const int64_t N = comm->world_size();
    Tensor parts = be.empty({N, B, Vl}, be.act_dtype());
    comm->all_gather(logits, parts);
    Tensor full = be.empty({B, N * Vl}, be.act_dtype());
    be.merge_vocab_shards(parts, full);
    return full;
  }
};

}  // namespace nanovllm
