#include "nanovllm/config/kv_cache_dtype.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

KVCacheDtype parse_kv_cache_dtype(const std::string& s) {
  if (s == "auto") return KVCacheDtype::Auto;
  if (s == "bf16" || s == "bfloat16") return KVCacheDtype::BF16;
  if (s == "fp8" || s == "fp8_e4m3") return KVCacheDtype::FP8E4M3;
  throw UserError("--kv-cache-dtype " + s + ": not implemented (use auto, bf16, fp8 or fp8_e4m3" +
                  (s.rfind("fp8", 0) == 0 ? "; only the E4M3 FP8 format is)" : ")"));
}

const char* kv_cache_dtype_name(KVCacheDtype d) {
  switch (d) {
    case KVCacheDtype::Auto: return "auto";
    case KVCacheDtype::BF16: return "bf16";
    case KVCacheDtype::FP8E4M3: return "fp8_e4m3";
  }
  return "?";
}

DType resolve_kv_cache_dtype(KVCacheDtype d, DType act_dtype, const std::string& backend) {
  (void)backend;  // every backend stores every cache dtype
  switch (d) {
    case KVCacheDtype::Auto: return act_dtype;
    case KVCacheDtype::FP8E4M3: return DType::F8E4M3;
    case KVCacheDtype::BF16: return DType::BF16;  // the CPU backend (F32 math) rounds what it stores
  }
  return act_dtype;
}

}  // namespace nanovllm
