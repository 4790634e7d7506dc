// The per-layer scales of an FP8 KV cache, from the checkpoint where it has them, under the names
// vLLM loads (its maybe_remap_kv_scale_name): model.layers.N.self_attn.k_scale / v_scale (also with
// .attn. before k_scale, or ModelOpt's self_attn.k_proj.k_scale / self_attn.v_proj.v_scale), and the
// deprecated single self_attn.kv_scale for both. Each a one-element tensor (F32, BF16 or F16),
// positive and finite. A layer without them keeps 1.0.
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/config/kv_cache_dtype.h"

namespace nanovllm {

class SafetensorsCheckpoint;

// [num_layers] scales; throws LoadError naming a tensor that is not one positive finite number.
std::vector<KVScales> load_kv_cache_scales(const SafetensorsCheckpoint& ckpt, int64_t num_layers);

}  // namespace nanovllm
