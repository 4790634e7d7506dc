#include "nanovllm/backends/checks.h"

#include <climits>
#include <cmath>
#include <set>
#include <string>

#include "nanovllm/backends/backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

[[noreturn]] static void fail(const char* op, const std::string& what) { throw Error(std::string(op) + ": " + what); }

static void want_dim(const char* op, const char* name, const Tensor& t, int64_t d) {
  if (t.dim() != d)
    fail(op, std::string(name) + " must have " + std::to_string(d) + " dims, got " + shape_str(t.shape()));
}

void check_embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  want_dim("embedding", "ids", ids, 1);
  want_dim("embedding", "table", table, 2);
  want_dim("embedding", "out", out, 2);
  if (ids.dtype() != DType::I32) fail("embedding", "ids must be I32");
  if (out.size(0) != ids.size(0) || out.size(1) != table.size(1))
    fail("embedding", "out " + shape_str(out.shape()) + " does not match ids " + shape_str(ids.shape()) + " x table " +
                          shape_str(table.shape()));
}

void check_rms_norm(const Tensor& x, const Tensor& w, const Tensor& out) {
  want_dim("rms_norm", "x", x, 2);
  if (w.numel() != x.size(1) || out.shape() != x.shape())
    fail("rms_norm", "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", out " + shape_str(out.shape()));
}

void check_linear(const Tensor& x, const Tensor& w, const Tensor& out) {
  want_dim("linear", "x", x, 2);
  want_dim("linear", "w", w, 2);
  want_dim("linear", "out", out, 2);
  if (x.size(1) != w.size(1) || out.size(0) != x.size(0) || out.size(1) != w.size(0))
    fail("linear",
         "x " + shape_str(x.shape()) + " @ w^T " + shape_str(w.shape()) + " -> out " + shape_str(out.shape()));
}

void check_qkv(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, const char* op) {
  want_dim(op, "qkv", qkv, 2);
  if (qkv.size(1) != (num_heads + 2 * num_kv_heads) * head_dim)
    fail(op, "qkv " + shape_str(qkv.shape()) + " does not hold " + std::to_string(num_heads) + "+2x" +
                 std::to_string(num_kv_heads) + " heads of " + std::to_string(head_dim));
}

void check_rope(const RopeParams& rope, int64_t head_dim, const char* op) {
  if (int64_t(rope.inv_freq.size()) != head_dim / 2)
    fail(op, "rope.inv_freq has " + std::to_string(rope.inv_freq.size()) +
                 " entries, not head_dim / 2 = " + std::to_string(head_dim / 2));
}

void check_qk_norm_weights(const Tensor& q_norm_w, const Tensor& k_norm_w, int64_t head_dim, const char* op) {
  if (!q_norm_w.defined() && !k_norm_w.defined()) return;
  if (!q_norm_w.defined() || !k_norm_w.defined() || q_norm_w.numel() != head_dim || k_norm_w.numel() != head_dim)
    fail(op, "q/k norm weights must both be [head_dim] or both be absent");
}

void check_add_bias(const Tensor& x, const Tensor& bias) {
  want_dim("add_bias", "x", x, 2);
  want_dim("add_bias", "bias", bias, 1);
  if (bias.size(0) != x.size(1)) fail("add_bias", "x " + shape_str(x.shape()) + " + bias " + shape_str(bias.shape()));
}

void check_sliding_window(int64_t sliding_window, const char* op) {
  if (sliding_window < 0 || sliding_window > INT32_MAX)
    fail(op, "sliding_window " + std::to_string(sliding_window) + " is not in [0, 2^31)");
}

void check_kv_cache(const Tensor& k_cache, const Tensor& v_cache, int64_t num_kv_heads, int64_t head_dim) {
  want_dim("kv_cache", "k_cache", k_cache, 4);
  if (k_cache.shape() != v_cache.shape() || k_cache.size(2) != num_kv_heads || k_cache.size(3) != head_dim)
    fail("kv_cache", "k_cache " + shape_str(k_cache.shape()) + ", v_cache " + shape_str(v_cache.shape()));
}

void check_kv_scales(KVScales s, const char* op) {
  if (!(s.k > 0 && s.v > 0 && std::isfinite(s.k) && std::isfinite(s.v)))
    fail(op,
         "KV cache scales must be positive and finite, got k " + std::to_string(s.k) + ", v " + std::to_string(s.v));
}

void check_metadata(const AttentionMetadata& md, int64_t num_tokens, int64_t num_cache_slots) {
  const char* op = "attention";
  if (int64_t(md.slot_mapping.size()) != num_tokens)
    fail(op, "slot_mapping has " + std::to_string(md.slot_mapping.size()) + " entries for " +
                 std::to_string(num_tokens) + " tokens");
  if (int64_t(md.cu_seqlens_q.size()) != md.num_seqs + 1 || int64_t(md.cu_seqlens_k.size()) != md.num_seqs + 1 ||
      int64_t(md.context_lens.size()) != md.num_seqs || int64_t(md.block_tables.size()) != md.num_seqs * md.max_blocks)
    fail(op, "metadata vectors do not match num_seqs " + std::to_string(md.num_seqs));
  if (md.cu_seqlens_q.back() != num_tokens) fail(op, "cu_seqlens_q does not end at the token count");
  for (int32_t s : md.slot_mapping)
    if (s >= num_cache_slots)
      fail(op,
           "slot " + std::to_string(s) + " is outside the KV cache of " + std::to_string(num_cache_slots) + " slots");
}

void check_silu_and_mul(const Tensor& x, const Tensor& out) {
  want_dim("silu_and_mul", "x", x, 2);
  if (out.dim() != 2 || out.size(0) != x.size(0) || out.size(1) * 2 != x.size(1))
    fail("silu_and_mul", "x " + shape_str(x.shape()) + " -> out " + shape_str(out.shape()));
}

void check_linear_silu_mul(const Tensor& x, const Tensor& w, const Tensor& out) {
  want_dim("linear_silu_mul", "x", x, 2);
  want_dim("linear_silu_mul", "w", w, 2);
  want_dim("linear_silu_mul", "out", out, 2);
  if (w.size(0) != 2 * out.size(1) || w.size(1) != x.size(1) || out.size(0) != x.size(0))
    fail("linear_silu_mul", "want x [T, K], w [2I, K] (gate rows, then up rows), out [T, I]; got x " +
                                shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", out " +
                                shape_str(out.shape()));
}

void check_add_rms_norm_linear(const Tensor& x, const Tensor& residual, const Tensor& norm_w, const Tensor& w,
                               const Tensor& out, bool silu_mul) {
  check_rms_norm(x, norm_w, residual);
  if (silu_mul)
    check_linear_silu_mul(x, w, out);
  else
    check_linear(x, w, out);
}

void check_cast(const Tensor& src, const Tensor& dst) {
  if (src.shape() != dst.shape()) fail("cast", shape_str(src.shape()) + " -> " + shape_str(dst.shape()));
}

void check_copy_kv_blocks(const Tensor& cache, const std::vector<KVBlockCopy>& copies) {
  want_dim("copy_kv_blocks", "cache", cache, 4);
  const int64_t blocks = cache.size(1), bs = cache.size(2);
  std::set<int32_t> written, read;
  for (const KVBlockCopy& c : copies) {
    const std::string what = "copy of " + std::to_string(c.num_slots) + " slots from block " +
                             std::to_string(c.src_block) + " to block " + std::to_string(c.dst_block);
    if (c.src_block < 0 || c.src_block >= blocks || c.dst_block < 0 || c.dst_block >= blocks)
      fail("copy_kv_blocks", what + ": a block outside the cache's " + std::to_string(blocks));
    if (c.num_slots < 1 || c.num_slots > bs) fail("copy_kv_blocks", what + ": slots outside 1.." + std::to_string(bs));
    if (c.src_block == c.dst_block) fail("copy_kv_blocks", what + ": the same block");
    if (written.count(c.dst_block) || read.count(c.dst_block) || written.count(c.src_block))
      fail("copy_kv_blocks", what + ": another copy of the step uses its blocks");
    written.insert(c.dst_block);
    read.insert(c.src_block);
  }
}

void check_merge_vocab_shards(const Tensor& parts, const Tensor& out) {
  want_dim("merge_vocab_shards", "parts", parts, 3);
  want_dim("merge_vocab_shards", "out", out, 2);
  if (parts.dtype() != out.dtype() || out.size(0) != parts.size(1) || out.size(1) != parts.size(0) * parts.size(2))
    fail("merge_vocab_shards", "parts " + shape_str(parts.shape()) + " -> out " + shape_str(out.shape()));
}

void check_gather_rows(const Tensor& x, const std::vector<int32_t>& rows, const Tensor& out) {
  if (x.dim() != 2 || out.dim() != 2 || out.size(0) != int64_t(rows.size()) || out.size(1) != x.size(1))
    fail("gather_rows", "x " + shape_str(x.shape()) + " -> out " + shape_str(out.shape()));
  for (int32_t r : rows)
    if (r < 0 || r >= x.size(0)) fail("gather_rows", "row " + std::to_string(r) + " out of range");
}

void check_moe_topk(const Tensor& logits, int64_t top_k, const Tensor& weights, const Tensor& ids) {
  want_dim("moe_topk", "logits", logits, 2);
  want_dim("moe_topk", "weights", weights, 2);
  want_dim("moe_topk", "ids", ids, 2);
  if (top_k < 1 || top_k > logits.size(1))
    fail("moe_topk", "top_k " + std::to_string(top_k) + " outside [1, " + std::to_string(logits.size(1)) + "]");
  if (weights.dtype() != DType::F32 || ids.dtype() != DType::I32) fail("moe_topk", "weights must be F32, ids I32");
  const Shape want{logits.size(0), top_k};
  if (weights.shape() != want || ids.shape() != want)
    fail("moe_topk", "logits " + shape_str(logits.shape()) + ", top_k " + std::to_string(top_k) + ": weights " +
                         shape_str(weights.shape()) + ", ids " + shape_str(ids.shape()));
}

void check_moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights, const Tensor& ids,
                       const Tensor& out) {
  want_dim("moe_experts", "x", x, 2);
  want_dim("moe_experts", "w13", w13, 3);
  want_dim("moe_experts", "w2", w2, 3);
  want_dim("moe_experts", "weights", weights, 2);
  want_dim("moe_experts", "ids", ids, 2);
  want_dim("moe_experts", "out", out, 2);
  const int64_t T = x.size(0), H = x.size(1), E = w13.size(0), I = w13.size(1) / 2;
  if (w13.size(1) % 2 != 0 || w13.size(2) != H || w2.shape() != Shape{E, H, I})
    fail("moe_experts", "x " + shape_str(x.shape()) + ", w13 " + shape_str(w13.shape()) + ", w2 " +
                            shape_str(w2.shape()) + ": want w13 [E, 2I, H] and w2 [E, H, I]");
  if (weights.dtype() != DType::F32 || ids.dtype() != DType::I32) fail("moe_experts", "weights must be F32, ids I32");
  if (weights.size(0) != T || ids.shape() != weights.shape() || weights.size(1) > E)
    fail("moe_experts", "weights " + shape_str(weights.shape()) + ", ids " + shape_str(ids.shape()) + " for " +
                            std::to_string(T) + " tokens of " + std::to_string(E) + " experts");
  if (out.shape() != x.shape()) fail("moe_experts", "out " + shape_str(out.shape()) + " != x " + shape_str(x.shape()));
}

void Backend::qk_norm_rope_store(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                                 Tensor& k_cache, Tensor& v_cache, int64_t num_heads, int64_t num_kv_heads,
                                 int64_t head_dim, float eps, const RopeParams& rope, const AttentionMetadata& md,
                                 KVScales kv_scales) {
  qk_norm_rope(qkv, q_norm_w, k_norm_w, positions, num_heads, num_kv_heads, head_dim, eps, rope);
  store_kvcache(qkv, k_cache, v_cache, num_heads, num_kv_heads, head_dim, md, kv_scales);
}

void Backend::linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  (void)x, (void)scales, (void)out;
  throw UserError("linear: " + std::string(dtype_name(w.dtype())) + " (quantized) weights are not implemented on the " +
                  name() + " backend");
}

void Backend::quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  (void)w, (void)codes, (void)scales;
  throw UserError(std::string("--quantization ") + quantization_name(q) + ": not implemented on the " + name() +
                  " backend");
}

void Backend::linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear_silu_mul(x, w, out);
  Tensor gate_up = empty({x.size(0), w.size(0)}, out.dtype());
  linear(x, w, gate_up);
  silu_and_mul(gate_up, out);
}

void Backend::linear_silu_mul_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_linear_silu_mul(x, w, out);
  Tensor gate_up = empty({x.size(0), w.size(0)}, out.dtype());
  linear_quantized(x, w, scales, gate_up);
  silu_and_mul(gate_up, out);
}

void Backend::add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                  Tensor& out, bool silu_mul) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, silu_mul);
  add_rms_norm(x, residual, norm_w, eps);
  if (silu_mul)
    linear_silu_mul(x, w, out);
  else
    linear(x, w, out);
}

void Backend::add_rms_norm_linear_rope(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                       Tensor& out, const QkNormRopeStore& r) {
  add_rms_norm_linear(x, residual, norm_w, eps, w, out, false);
  qk_norm_rope_store(out, r);
}

void Backend::linear_rope(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r) {
  linear(x, w, out);
  qk_norm_rope_store(out, r);
}

void Backend::add_rms_norm_linear_quantized(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps,
                                            const Tensor& w, const WeightScales& scales, Tensor& out, bool silu_mul) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, silu_mul);
  add_rms_norm(x, residual, norm_w, eps);
  if (silu_mul)
    linear_silu_mul_quantized(x, w, scales, out);
  else
    linear_quantized(x, w, scales, out);
}

Backend::SampledTokens Backend::sample_async(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                             const Tensor* device_out) {
  for (const auto& r : rows)
    if (r.num_logprobs >= 0) throw Error("sample_async: a row asks for logprobs (use sample)");
  SampledTokens t;
  t.host = sample(logits, rows);
  t.device = device_out ? *device_out : empty({int64_t(t.host.size())}, DType::I32);
  if (t.device.numel() != int64_t(t.host.size()) || t.device.dtype() != DType::I32)
    throw Error("sample_async: device_out must be [" + std::to_string(t.host.size()) + "] I32");
  upload(t.host.data(), DType::I32, t.device);
  return t;
}

std::vector<int32_t> Backend::wait_tokens(SampledTokens& t) {
  if (t.ticket != -1) throw Error(name() + " backend: wait_tokens on a ticket it did not issue");
  return t.host;
}

Backend::HostCopy Backend::to_host_f32_async(const Tensor& t) {
  HostCopy c;
  c.host = to_host_f32(t);
  c.dtype = t.dtype();
  c.n = t.numel();
  return c;
}

std::vector<float> Backend::wait_host_f32(HostCopy& c) {
  if (c.ticket != -1) throw Error(name() + " backend: wait_host_f32 on a ticket it did not issue");
  return c.host;
}

void Backend::throw_no_graphs() const { throw Error(name() + " backend: CUDA graphs are not supported"); }

}  // namespace nanovllm
