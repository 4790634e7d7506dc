// Everything the attention op needs to know about a batch, passed explicitly to forward()
// (nano-vllm keeps this in a global _CONTEXT; we do not). B = sequences in the batch,
// T = tokens computed this step (sum of q lengths).
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/utils/tensor.h"

namespace nanovllm {

struct AttentionMetadata {
  bool is_prefill = false;
  int64_t num_seqs = 0;               // B
  int64_t num_tokens = 0;             // T
  std::vector<int32_t> cu_seqlens_q;  // [B+1] prefix sums of new-token counts
  std::vector<int32_t> cu_seqlens_k;  // [B+1] prefix sums of context lengths (cached + new)
  int32_t max_seqlen_q = 0, max_seqlen_k = 0;
  std::vector<int32_t> slot_mapping;  // [T] cache slot of each new token (block*bs + offset), -1 = skip
  std::vector<int32_t> context_lens;  // [B] keys visible to the sequence's last token
  std::vector<int32_t> block_tables;  // [B, max_blocks] row-major, padded with -1
  int64_t max_blocks = 0;
  // Device copies of the vectors above (filled by backends that need them, e.g. CUDA).
  Tensor d_cu_seqlens_q, d_cu_seqlens_k, d_slot_mapping, d_context_lens, d_block_tables;
  // Built by a backend on first use in the step and reused by the step's other layers (the CUDA
  // backend's cos/sin table for its fused qkv GEMM); rope_table_key: what it was built from.
  mutable Tensor d_rope_table;
  mutable std::vector<uint32_t> rope_table_key;
};

}  // namespace nanovllm
