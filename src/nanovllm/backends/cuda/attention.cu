// CudaBackend::attention: paged causal attention on BF16 caches [num_blocks, block_size, Hkv, D]
// (or FP8 E4M3 ones, --kv-cache-dtype fp8: the decode and mma.sync kernels convert in registers,
// the other prefill kernels read a BF16 scratch copy of the blocks they need, kv_fp8_scratch.cu)
// with FP32 softmax. Checks the shapes, then plan_attention() (kernel_plan.h, which has the rules
// and why) splits the batch between these kernels:
//  * the leading sequences with one new token (a decode batch, or the decodes of a mixed step;
//    D = 64/128, G <= 8): the split-KV kernel of attention_decode.cu;
//  * the others, on tensor cores (D = 64/128, G <= 64), as KernelOptions::prefill_attention says;
//    its default (auto) takes, on sm_90 with sm_90a code in the build, the FlashAttention-3-
//    structured kernel with a TMA producer warp (attention_prefill_wgmma_tma.cu) where the block
//    size is a multiple of 8, else the wgmma kernel with cp.async loads
//    (attention_prefill_wgmma.cu); elsewhere flash-attention-2 on mma.sync
//    (attention_prefill_mma.cu), which also takes windowed layers (below) and, in a decode step
//    with an FP8 cache, the rows the decode kernel does not (the scratch copy's grid would depend
//    on the contexts, which a CUDA graph fixes at capture);
//  * anything else: the CUDA-core kernel of attention_tiled.cu.
// Sequence b computes the q tokens cu_seqlens_q[b]..cu_seqlens_q[b+1]), the last of its
// context_lens[b] keys; its new token i sees keys [0, ctx - qlen + i], with a sliding window W only
// the last W of them: the decode kernel splits only those, the prefill kernels skip key tiles
// before the window and mask the rest; windowed prefills take the mma.sync kernel (the Hopper
// kernels have no window). Every key is read from the paged cache through the block table
// (prefix-cache hits and earlier prefill chunks included).
#include <algorithm>

#include "nanovllm/backends/cuda/attention_decode.cuh"
#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

using namespace cuda;

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// The fields the decode and prefill kernels' arguments share (DecodeAttnArgs, PrefillAttnArgs):
// tensors, paged-cache geometry and the softmax scale.
template <class Args>
void set_paged_args(Args& a, const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                    int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale_log2,
                    const AttentionMetadata& md) {
  a.qkv = qkv.data<bf16>();
  if (k_cache.dtype() == DType::BF16) {  // else the FP8 fields, set by the caller
    a.kc = k_cache.data<bf16>();
    a.vc = v_cache.data<bf16>();
  }
  a.out = out.data<bf16>();
  a.ctx_lens = md.d_context_lens.data<int32_t>();
  a.block_tables = md.max_blocks > 0 ? md.d_block_tables.data<int32_t>() : nullptr;
  a.max_blocks = int(md.max_blocks);
  a.B = int(md.num_seqs);
  a.Hq = int(num_heads);
  a.Hkv = int(num_kv_heads);
  a.D = int(head_dim);
  a.bs = int(k_cache.size(1));
  a.W = qkv.size(1);
  a.scale_log2 = scale_log2;
}

}  // namespace

void CudaBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                            int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                            const AttentionMetadata& md, int64_t sliding_window, KVScales kv_scales,
                            const ReadAhead& then) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "attention");
  check_sliding_window(sliding_window, "attention");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  const int64_t T = qkv.size(0), D = head_dim;
  if (out.dim() != 2 || out.size(0) != T || out.size(1) != num_heads * D)
    throw Error("attention: out must be [T, Hq*D], got " + shape_str(out.shape()));
  const bool fp8 = k_cache.dtype() == DType::F8E4M3;
  if (qkv.dtype() != DType::BF16 || out.dtype() != DType::BF16 || v_cache.dtype() != k_cache.dtype() ||
      !(fp8 || k_cache.dtype() == DType::BF16))
    throw Error("attention: qkv and out must be BF16, the caches both BF16 or both F8E4M3");
  if (fp8) check_kv_scales(kv_scales, "attention");
  if (D % 8 != 0 || D > 256)
    throw Error("attention: head_dim " + std::to_string(D) + " must be a multiple of 8, at most 256");
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
    throw Error("attention: num_heads must be a multiple of num_kv_heads");
  const int64_t G = num_heads / num_kv_heads;
  if (!md.d_cu_seqlens_q.defined()) throw Error("attention: prepare_metadata() was not called for this batch");
  if (T == 0 || md.num_seqs == 0) return;
  const Stream s = on_stream();
  const int64_t B = md.num_seqs;
  const float scale_log2 = scale * kLog2e;

  // Leading sequences with one new token. A decode step (also under CUDA-graph capture, where the
  // host offsets may be absent) is all of them.
  int64_t single = 0;
  if (!md.is_prefill && T == B)
    single = B;
  else
    while (single < B && md.cu_seqlens_q[size_t(single + 1)] - md.cu_seqlens_q[size_t(single)] == 1) ++single;
  AttentionProblem problem{B, single, D, G, k_cache.size(1)};
  problem.fp8_kv = fp8;
  problem.decode_step = !md.is_prefill;
  AttentionPlan plan = plan_attention(problem, wgmma_, options_);
  if (sliding_window > 0 &&
      (plan.rest == AttentionKernel::PrefillWgmma || plan.rest == AttentionKernel::PrefillWgmmaTma))
    plan.rest = AttentionKernel::PrefillMma;  // same head dims and groups, with the window
  if (plan.decode_seqs > 0) {
    // Rows 0..decode_seqs-1 are those sequences' tokens: the prefix of every per-sequence array.
    DecodeAttnArgs a;
    set_paged_args(a, qkv, k_cache, v_cache, out, num_heads, num_kv_heads, D, scale_log2, md);
    if (fp8) {
      a.kc = k_cache.raw(), a.vc = v_cache.raw(), a.fp8 = true;
      a.k_scale = kv_scales.k, a.v_scale = kv_scales.v;
    }
    a.window = int(sliding_window);
    const int64_t Bd = plan.decode_seqs;
    a.B = int(Bd);
    DecodeAttentionProblem prob;
    prob.num_seqs = Bd, prob.num_heads = num_heads, prob.num_kv_heads = num_kv_heads, prob.head_dim = D;
    prob.fp8 = fp8;
    prob.mixed_step = plan.rest != AttentionKernel::None;
    prob.l2_bytes = l2_bytes_;
    // The longest context of these rows: from the host lengths (under graph capture, the bound of
    // the graph's context range), else the batch's max_seqlen_k.
    if (int64_t(md.context_lens.size()) >= Bd)
      for (int64_t b = 0; b < Bd; ++b)
        prob.max_context = std::max<int64_t>(prob.max_context, md.context_lens[size_t(b)]);
    else
      prob.max_context = md.max_seqlen_k;
    if (sliding_window > 0) prob.max_context = std::min(prob.max_context, sliding_window);  // keys read
    const DecodeAttentionPlan dplan = plan_decode_attention(prob);                          // kernel_plan.h
    a.S = dplan.splits;
    a.warps = dplan.warps;
    a.cluster = dplan.cluster;
    Tensor part_o, part_lse;
    if (a.S > 1 && !a.cluster) {
      part_o = empty({Bd * num_heads * a.S * D}, DType::F32);
      part_lse = empty({Bd * num_heads * a.S}, DType::F32);
      a.part_o = part_o.data<float>();
      a.part_lse = part_lse.data<float>();
    }
    // The layer's next weights (o_proj, the MLP, the next qkv_proj: `then`), up to the plan's
    // budget, in the order they are read: the merge kernel brings them into L2.
    int64_t ahead = 0;
    for (const Tensor* t : then.tensors) {
      if (!t || !t->defined() || ahead >= dplan.read_ahead_bytes || !aligned16({t->raw()}))
        continue;  // (bulk prefetches start at 16-byte boundaries)
      const int64_t n = std::min<int64_t>(int64_t(t->nbytes()), dplan.read_ahead_bytes - ahead) & ~int64_t(15);
      a.ahead.ptr[a.ahead.n] = static_cast<const char*>(t->raw());
      a.ahead.bytes[a.ahead.n++] = n;
      ahead += n;
    }
    decode_attention(a, s);
  }
  if (plan.rest == AttentionKernel::None) return;

  // Sequences decode_seqs..B-1: their per-sequence arrays start at that index; cu_q keeps absolute
  // row offsets into qkv and out.
  const int64_t b0 = plan.decode_seqs;
  PrefillAttnArgs a;
  set_paged_args(a, qkv, k_cache, v_cache, out, num_heads, num_kv_heads, D, scale_log2, md);
  if (fp8) {
    a.kc8 = k_cache.data<uint8_t>(), a.vc8 = v_cache.data<uint8_t>();
    a.k_scale = kv_scales.k, a.v_scale = kv_scales.v;
  }
  a.window = int(sliding_window);
  a.B = int(B - b0);
  a.cu_q = md.d_cu_seqlens_q.data<int32_t>() + b0;
  a.ctx_lens += b0;
  if (a.block_tables) a.block_tables += b0 * md.max_blocks;
  for (int64_t b = b0; b < B; ++b)
    a.max_q = std::max<int>(a.max_q, md.cu_seqlens_q[size_t(b + 1)] - md.cu_seqlens_q[size_t(b)]);
  // FP8 cache on a kernel that reads BF16: these sequences' blocks converted, with their own table.
  Tensor scratch_k, scratch_v, scratch_tables;
  if (fp8 && plan.rest != AttentionKernel::PrefillMma) {
    if (int64_t(md.context_lens.size()) < B || !a.block_tables)
      throw Error("attention: an FP8 KV cache prefill needs the host context lengths and block tables");
    const int64_t bs = k_cache.size(1);
    int64_t n = 0;
    for (int64_t b = b0; b < B; ++b) n += (md.context_lens[size_t(b)] + bs - 1) / bs;
    scratch_k = empty({n, bs, num_kv_heads, D}, DType::BF16);
    scratch_v = empty({n, bs, num_kv_heads, D}, DType::BF16);
    scratch_tables = empty({B - b0, md.max_blocks}, DType::I32);
    KvFp8ScratchArgs c;
    c.k8 = a.kc8, c.v8 = a.vc8, c.k_scale = kv_scales.k, c.v_scale = kv_scales.v;
    c.block_tables = a.block_tables, c.ctx_lens = a.ctx_lens;
    c.kb = scratch_k.data<bf16>(), c.vb = scratch_v.data<bf16>(), c.tables_out = scratch_tables.data<int32_t>();
    c.B = a.B, c.max_blocks = a.max_blocks, c.bs = int(bs), c.Hkv = int(num_kv_heads), c.D = int(D);
    kv_fp8_to_bf16_scratch(c, n, s);
    a.kc = scratch_k.data<bf16>(), a.vc = scratch_v.data<bf16>(), a.kc8 = nullptr, a.vc8 = nullptr;
    a.block_tables = scratch_tables.data<int32_t>();
  }
  const int attention_ctas = options_.prefill_persistent ? num_sms_ : 0;
  if (plan.rest == AttentionKernel::PrefillWgmmaTma && scratch_k.defined()) {
    // Per call (the scratch moves between layers and steps): not kept in cache_tma_'s map.
    const int64_t slots = scratch_k.size(0) * scratch_k.size(1);
    prefill_attention_wgmma_tma(a, make_cache_tma(a.kc, slots, num_kv_heads * D, k_cache.size(1)),
                                make_cache_tma(a.vc, slots, num_kv_heads * D, k_cache.size(1)), attention_ctas, s);
  } else if (plan.rest == AttentionKernel::PrefillWgmmaTma)
    prefill_attention_wgmma_tma(a, cache_tma(k_cache), cache_tma(v_cache), attention_ctas, s);
  else if (plan.rest == AttentionKernel::PrefillWgmma)
    prefill_attention_wgmma(a, s);
  else if (plan.rest == AttentionKernel::PrefillMma)
    prefill_attention_mma(a, s, prefill_rows_per_warp_);
  else
    prefill_attention_tiled(a, s);
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm
