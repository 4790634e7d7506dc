#include "nanovllm/engine/kv_cache_scales.h"

#include <cmath>
#include <string>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

namespace {

// The first of `names` the checkpoint has, as one positive finite float; nullopt-like: false.
bool read_scale(const SafetensorsCheckpoint& ckpt, const std::vector<std::string>& names, float& out) {
  for (const auto& n : names) {
    const TensorInfo* t = ckpt.find(n);
    if (!t) continue;
    if (t->numel() != 1 || !(t->dtype == DType::F32 || t->dtype == DType::BF16 || t->dtype == DType::F16))
      throw LoadError(t->file + ": KV cache scale " + n + " must be one F32, BF16 or F16 number (got " +
                      dtype_name(t->dtype) + ", " + std::to_string(t->numel()) + " elements)");
    float v = 0;
    convert_to_f32(t->data, t->dtype, 1, &v);
    if (!(v > 0) || !std::isfinite(v))
      throw LoadError(t->file + ": KV cache scale " + n + " must be positive and finite (got " + std::to_string(v) +
                      ")");
    out = v;
    return true;
  }
  return false;
}

}  // namespace

std::vector<KVScales> load_kv_cache_scales(const SafetensorsCheckpoint& ckpt, int64_t num_layers) {
  std::vector<KVScales> scales(static_cast<size_t>(num_layers));
  for (int64_t l = 0; l < num_layers; ++l) {
    const std::string a = "model.layers." + std::to_string(l) + ".self_attn.";
    KVScales& s = scales[size_t(l)];
    float kv = 0;
    if (read_scale(ckpt, {a + "kv_scale"}, kv)) s.k = s.v = kv;
    read_scale(ckpt, {a + "k_scale", a + "attn.k_scale", a + "k_proj.k_scale"}, s.k);
    read_scale(ckpt, {a + "v_scale", a + "attn.v_scale", a + "v_proj.v_scale"}, s.v);
  }
  return scales;
}

}  // namespace nanovllm
