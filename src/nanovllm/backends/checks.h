// Shape and dtype checks shared by every backend: each op's implementation calls its check
// first, so a wrong shape is an Error naming the op and the shapes, never a stray write.
#pragma once
#include <vector>

#include "nanovllm/backends/attention_metadata.h"
#include "nanovllm/backends/kv_block_copy.h"
#include "nanovllm/backends/rope_params.h"
#include "nanovllm/config/kv_cache_dtype.h"
#include "nanovllm/utils/tensor.h"

namespace nanovllm {

void check_embedding(const Tensor& ids, const Tensor& table, const Tensor& out);
void check_merge_vocab_shards(const Tensor& parts, const Tensor& out);
void check_rms_norm(const Tensor& x, const Tensor& w, const Tensor& out);
void check_linear(const Tensor& x, const Tensor& w, const Tensor& out);
void check_qkv(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, const char* op);
void check_rope(const RopeParams& rope, int64_t head_dim, const char* op);
// q/k norm weights: both [head_dim], or both undefined (no q/k norm).
void check_qk_norm_weights(const Tensor& q_norm_w, const Tensor& k_norm_w, int64_t head_dim, const char* op);
void check_add_bias(const Tensor& x, const Tensor& bias);
void check_sliding_window(int64_t sliding_window, const char* op);
// FP8 KV cache scales: positive and finite.
void check_kv_scales(KVScales s, const char* op);
void check_kv_cache(const Tensor& k_cache, const Tensor& v_cache, int64_t num_kv_heads, int64_t head_dim);
void check_metadata(const AttentionMetadata& md, int64_t num_tokens, int64_t num_cache_slots);
void check_silu_and_mul(const Tensor& x, const Tensor& out);
void check_linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& out);
void check_add_rms_norm_linear(const Tensor& x, const Tensor& residual, const Tensor& norm_w, const Tensor& w,
                               const Tensor& out, bool silu_mul);
void check_cast(const Tensor& src, const Tensor& dst);
// cache [P, num_blocks, block_size, R]; every copy inside it, its blocks distinct, and no block both
// written by one copy and read or written by another.
void check_copy_kv_blocks(const Tensor& cache, const std::vector<KVBlockCopy>& copies);
void check_moe_topk(const Tensor& logits, int64_t top_k, const Tensor& weights, const Tensor& ids);
void check_moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights, const Tensor& ids,
                       const Tensor& out);
void check_gather_rows(const Tensor& x, const std::vector<int32_t>& rows, const Tensor& out);

}  // namespace nanovllm
