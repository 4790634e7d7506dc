// KVCacheDtype: how the paged KV cache stores keys and values (vLLM's --kv-cache-dtype).
//   auto      the model's activation dtype (BF16 on CUDA, F32 on the CPU backend)
//   bf16      BF16 (also "bfloat16"); the CPU backend, which computes in F32, rounds keys and values
//             to BF16 as it stores them (half the bytes of its F32 cache) and widens them as it reads
//   fp8       E4M3 (OCP FP8, also "fp8_e4m3"): one byte per element, so twice the tokens fit in
//             the same memory. Stored as round-to-nearest(x / scale) saturated to +-448, read back
//             as code * scale, with one k and one v scale per layer (KVScales: 1.0 unless the
//             checkpoint has vLLM's k_scale / v_scale tensors, engine/kv_cache_scales.h).
#pragma once
#include <string>

#include "nanovllm/utils/dtype.h"

namespace nanovllm {

enum class KVCacheDtype { Auto, BF16, FP8E4M3 };

// Parses a --kv-cache-dtype value; throws UserError naming it and the accepted values.
KVCacheDtype parse_kv_cache_dtype(const std::string& s);
// The canonical name: "auto", "bf16" or "fp8_e4m3".
const char* kv_cache_dtype_name(KVCacheDtype d);

// The cache's element type on a backend computing in act_dtype (named `backend` in errors):
// auto -> act_dtype; bf16 -> BF16; fp8 -> F8E4M3.
DType resolve_kv_cache_dtype(KVCacheDtype d, DType act_dtype, const std::string& backend);

// One layer's FP8 scales: stored = x / k (or v), read = stored * k (or v). 1.0 for 16/32-bit caches.
struct KVScales {
  float k = 1.0f, v = 1.0f;
};

}  // namespace nanovllm
