// Paged attention layer: attends the new queries to the whole context through the block tables
// (prefix hits and earlier prefill chunks are read from the cache like any other key). The step's
// own k/v are already in the cache: the model writes them together with q/k norm and RoPE
// (Backend::qk_norm_rope_store), one pass instead of two.
#pragma once
#include "nanovllm/backends/backend.h"

namespace nanovllm {

// One layer's view of the KV cache: k, v: [num_blocks, block_size, Hkv, D] in the act dtype or
// F8E4M3 (--kv-cache-dtype fp8, read and written with `scales`; kv_cache_dtype.h).
struct LayerKVCache {
  Tensor k, v;
  KVScales scales;
};

struct PagedAttention {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t sliding_window = 0;  // > 0: each query reads only its last sliding_window keys

  // qkv: [T, (Hq + 2 Hkv) * D] after q/k norm and RoPE, k/v stored -> [T, Hq * D]
  // then: what the layer reads next (Backend::attention may start loading it).
  Tensor forward(Backend& be, const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& md,
                 const ReadAhead& then = {}) const {
    Tensor out = be.empty({qkv.size(0), num_heads * head_dim}, qkv.dtype());
    be.attention(qkv, cache.k, cache.v, out, num_heads, num_kv_heads, head_dim, scale, md, sliding_window, cache.scales,
                 then);
    return out;
  }
};

}  // namespace nanovllm
