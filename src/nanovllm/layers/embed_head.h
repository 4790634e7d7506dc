// Token embedding and LM head. The head computes logits only for the last token of each
// sequence (rows picked by gather_rows), since only those are sampled. With tied embeddings the
// head's weight is the embedding table itself.
#pragma once
#include <vector>

#include "nanovllm/ops/backend.h"

namespace nanovllm {

struct VocabEmbedding {
  Tensor weight;  // [V, H]
  void create(Backend& be, int64_t vocab, int64_t hidden) { weight = be.empty({vocab, hidden}, be.weight_dtype()); }
  // ids: [T] I32 -> [T, H]
  Tensor forward(Backend& be, const Tensor& ids) const {
    Tensor out = be.empty({ids.size(0), weight.size(1)}, be.act_dtype());
    be.embedding(ids, weight, out);
    return out;
  }
};

struct LMHead {
  Tensor weight;  // [V, H]
  // hidden: [T, H]; last_rows: [B] row of each sequence's last token -> logits [B, V]
  Tensor forward(Backend& be, const Tensor& hidden, const std::vector<int32_t>& last_rows) const {
    // Decode: every row is a last token, so no gather (and nothing host-dependent to capture).
    bool all_rows = int64_t(last_rows.size()) == hidden.size(0);
    for (size_t i = 0; all_rows && i < last_rows.size(); ++i) all_rows = last_rows[i] == int32_t(i);
    Tensor last = hidden;
    if (!all_rows) {
      last = be.empty({int64_t(last_rows.size()), hidden.size(1)}, hidden.dtype());
      be.gather_rows(hidden, last_rows, last);
    }
    Tensor logits = be.empty({last.size(0), weight.size(0)}, be.act_dtype());
    be.linear(last, weight, logits);
    return logits;
  }
};

}  // namespace nanovllm
