// Memory-bound row ops on BF16 activations (FP32 math): embedding lookup, row gather, RMSNorm,
// fused residual-add + RMSNorm, SiLU-and-mul, KV-cache store through the slot mapping.
// A CTA per row (token); 16-byte vector accesses where the row length allows.
#include <algorithm>
#include <type_traits>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

using namespace cuda;

static void want_bf16(const Tensor& t, const char* op, const char* name) {
  if (t.device() != Device::CUDA || t.dtype() != DType::BF16)
    throw Error(std::string(op) + ": " + name + " must be a BF16 CUDA tensor (got " + dtype_name(t.dtype()) + ")");
}

// ---------------------------------------------------------------- row copies
// out[r] = src[idx[r]] for rows of `row_elems` 2-byte elements. idx from device memory (ids) or
// from the parameter block (gather rows; at most kMaxParamRows).
constexpr int kMaxParamRows = 960;
struct RowList {
  int32_t n;
  int32_t rows[kMaxParamRows];
};

// dst[r] = src[idx[r] - idx_offset], a zero row when that is outside [0, src_rows): ids of another
// rank's vocabulary shard under tensor parallelism (out-of-vocabulary ids are rejected on the host).
__global__ void copy_rows_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst,
                                 const int32_t* __restrict__ idx, int64_t row_elems, int64_t src_rows,
                                 int64_t idx_offset, bool vec) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int64_t s = int64_t(idx[r]) - idx_offset;
  uint16_t* o = dst + r * row_elems;
  if (s < 0 || s >= src_rows) {
    for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) o[i] = 0;
    return;
  }
  const uint16_t* in = src + int64_t(s) * row_elems;
  if (vec) {
    for (int64_t i = threadIdx.x; i < row_elems / 8; i += blockDim.x)
      reinterpret_cast<uint4*>(o)[i] = reinterpret_cast<const uint4*>(in)[i];
  } else {
    for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) o[i] = in[i];
  }
}

__global__ void copy_rows_param_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst, const RowList rl,
                                       int64_t row_elems, bool vec) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const uint16_t* in = src + int64_t(rl.rows[r]) * row_elems;
  uint16_t* o = dst + r * row_elems;
  if (vec) {
    for (int64_t i = threadIdx.x; i < row_elems / 8; i += blockDim.x)
      reinterpret_cast<uint4*>(o)[i] = reinterpret_cast<const uint4*>(in)[i];
  } else {
    for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) o[i] = in[i];
  }
}

static bool vec_ok(const void* a, const void* b, int64_t row_elems) {
  return row_elems % 8 == 0 && aligned16({a, b});
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) {
  check_embedding(ids, table, out);
  want_bf16(table, "embedding", "table");
  want_bf16(out, "embedding", "out");
  if (ids.device() != Device::CUDA) throw Error("embedding: ids must be on the GPU");
  const int64_t T = ids.size(0), H = table.size(1);
  if (T == 0) return;
  launch(copy_rows_kernel, unsigned(T), 128, 0, on_stream(), table.data<uint16_t>(), out.data<uint16_t>(),
         ids.data<int32_t>(), H, table.size(0), vocab_start, vec_ok(table.raw(), out.raw(), H));
}

void CudaBackend::gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) {
  check_gather_rows(x, rows, out);
  if (x.dtype() != out.dtype() || dtype_size(x.dtype()) != 2) throw Error("gather_rows: x and out must both be BF16");
  const int64_t B = int64_t(rows.size()), H = x.size(1);
  if (B == 0) return;
  const bool vec = vec_ok(x.raw(), out.raw(), H);
  if (B <= kMaxParamRows) {  // rows travel in the kernel's parameters: graph-capturable
    RowList rl;
    rl.n = int32_t(B);
    std::copy(rows.begin(), rows.end(), rl.rows);
    launch(copy_rows_param_kernel, unsigned(B), 128, 0, on_stream(), x.data<uint16_t>(), out.data<uint16_t>(), rl, H,
           vec);
  } else {
    Tensor idx = device_i32(rows.data(), B);
    launch(copy_rows_kernel, unsigned(B), 128, 0, on_stream(), x.data<uint16_t>(), out.data<uint16_t>(),
           idx.data<int32_t>(), H, x.size(0), int64_t(0), vec);
  }
}

// ---------------------------------------------------------------- RMSNorm
// out = x * rsqrt(mean(x^2) + eps) * w, one CTA per row; with `residual`: residual += x first
// (rounded to BF16, as a BF16 model does) and the norm is taken of the new residual. Like
// Qwen3RMSNorm in BF16, x * rsqrt(...) is rounded before the weight multiplies it.
template <bool kResidual>
__global__ void rms_norm_kernel(const bf16* __restrict__ x, bf16* __restrict__ residual, const bf16* __restrict__ w,
                                bf16* __restrict__ out, int H, float eps) {
  __shared__ float red[32];
  // The norm weight's first chunk per thread (all of it when H <= 8 x blockDim), before the wait:
  // weights are never written by the previous kernel, and loaded after the block sum their DRAM
  // latency sat in the critical path (two of these kernels per decoder layer at batch 1).
  const bool vec = (H % 8) == 0;
  const uint4 w_first =
      vec && int(threadIdx.x) < H / 8 ? __ldg(reinterpret_cast<const uint4*>(w) + threadIdx.x) : make_uint4(0, 0, 0, 0);
  pdl_begin();
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * H;
  bf16* rr = kResidual ? residual + row * H : nullptr;
  bf16* orow = out + row * H;
  float ss = 0.f;
  if (vec) {
    for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
      float a[8];
      unpack8(reinterpret_cast<const uint4*>(xr)[i], a);
      if constexpr (kResidual) {
        float r[8];
        unpack8(reinterpret_cast<const uint4*>(rr)[i], r);
#pragma unroll
        for (int k = 0; k < 8; ++k) a[k] = __bfloat162float(__float2bfloat16(a[k] + r[k]));
        reinterpret_cast<uint4*>(rr)[i] = pack8(a);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += a[k] * a[k];
    }
  } else {
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
      float a = __bfloat162float(xr[i]);
      if constexpr (kResidual) {
        bf16 s = __float2bfloat16(a + __bfloat162float(rr[i]));
        rr[i] = s;
        a = __bfloat162float(s);
      }
      ss += a * a;
    }
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / float(H) + eps);
  const bf16* src = kResidual ? rr : xr;  // re-read (L1/L2 hot); in the residual form x is overwritten
  if (vec) {
    for (int i = threadIdx.x; i < H / 8; i += blockDim.x) {
      float a[8], ww[8];
      unpack8(reinterpret_cast<const uint4*>(src)[i], a);
      unpack8(i == int(threadIdx.x) ? w_first : __ldg(reinterpret_cast<const uint4*>(w) + i), ww);
#pragma unroll
      for (int k = 0; k < 8; ++k) a[k] = bf16_round(a[k] * inv) * ww[k];
      reinterpret_cast<uint4*>(orow)[i] = pack8(a);
    }
  } else {
    for (int i = threadIdx.x; i < H; i += blockDim.x)
      orow[i] = __float2bfloat16(bf16_round(__bfloat162float(src[i]) * inv) * __bfloat162float(w[i]));
  }
}

static int row_threads(int64_t H) { return H >= 4096 ? 512 : H >= 1024 ? 256 : 128; }

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  check_rms_norm(x, w, out);
  want_bf16(x, "rms_norm", "x");
  want_bf16(w, "rms_norm", "w");
  want_bf16(out, "rms_norm", "out");
  const int64_t T = x.size(0), H = x.size(1);
  if (T == 0) return;
  launch(rms_norm_kernel<false>, unsigned(T), row_threads(H), 0, on_stream(), x.data<bf16>(), nullptr, w.data<bf16>(),
         out.data<bf16>(), int(H), eps);
}

void CudaBackend::add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) {
  check_rms_norm(x, w, residual);
  want_bf16(x, "add_rms_norm", "x");
  want_bf16(residual, "add_rms_norm", "residual");
  want_bf16(w, "add_rms_norm", "w");
  const int64_t T = x.size(0), H = x.size(1);
  if (T == 0) return;
  launch(rms_norm_kernel<true>, unsigned(T), row_threads(H), 0, on_stream(), x.data<bf16>(), residual.data<bf16>(),
         w.data<bf16>(), x.data<bf16>(), int(H), eps);
}

// ---------------------------------------------------------------- SiLU and mul
// x: [T, 2I] = [gate | up] -> out[T, I] = silu(gate) * up. grid (ceil(I/(8*blockDim)), T).
// silu(gate) is rounded to BF16 before the product, as act_fn(gate_proj(x)) * up_proj(x) is in a
// BF16 model.
__global__ void silu_and_mul_kernel(const bf16* __restrict__ x, bf16* __restrict__ out, int64_t I, bool vec) {
  pdl_begin();
  const int64_t t = blockIdx.y;
  const bf16* g = x + t * 2 * I;
  const bf16* u = g + I;
  bf16* o = out + t * I;
  if (vec) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= I / 8) return;
    float a[8], b[8];
    unpack8(reinterpret_cast<const uint4*>(g)[i], a);
    unpack8(reinterpret_cast<const uint4*>(u)[i], b);
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = silu_bf16(a[k]) * b[k];
    reinterpret_cast<uint4*>(o)[i] = pack8(a);
  } else {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < I; i += int64_t(gridDim.x) * blockDim.x) {
      const float a = __bfloat162float(g[i]);
      o[i] = __float2bfloat16(silu_bf16(a) * __bfloat162float(u[i]));
    }
  }
}

void CudaBackend::silu_and_mul(const Tensor& x, Tensor& out) {
  check_silu_and_mul(x, out);
  want_bf16(x, "silu_and_mul", "x");
  want_bf16(out, "silu_and_mul", "out");
  const int64_t T = out.size(0), I = out.size(1);
  if (T == 0 || I == 0) return;
  const bool vec = I % 8 == 0;
  dim3 grid(vec ? ceil_div(I / 8, 256) : std::min<unsigned>(ceil_div(I, 256), 64), unsigned(T));
  launch(silu_and_mul_kernel, grid, 256, 0, on_stream(), x.data<bf16>(), out.data<bf16>(), I, vec);
}

// ---------------------------------------------------------------- cast
// F32 <-> BF16, n elements, 4 per thread.
template <class S, class D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  pdl_begin();
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < n;
       i += int64_t(gridDim.x) * blockDim.x * 4)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i + k < n) {
        if constexpr (std::is_same_v<D, bf16>)
          dst[i + k] = __float2bfloat16(src[i + k]);
        else
          dst[i + k] = __bfloat162float(src[i + k]);
      }
}

void CudaBackend::cast(const Tensor& src, Tensor& dst) {
  check_cast(src, dst);
  if (src.device() != Device::CUDA || dst.device() != Device::CUDA) throw Error("cast: tensors must be on the GPU");
  const int64_t n = src.numel();
  if (n == 0) return;
  const auto st = on_stream();
  const unsigned grid = std::min<unsigned>(ceil_div(n, 4 * 256), 4 * unsigned(num_sms_));
  if (src.dtype() == dst.dtype()) {
    NV_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), size_t(n) * dtype_size(src.dtype()), cudaMemcpyDeviceToDevice,
                                  st.stream));
  } else if (src.dtype() == DType::F32 && dst.dtype() == DType::BF16) {
    launch(cast_kernel<float, bf16>, grid, 256, 0, st, src.data<float>(), dst.data<bf16>(), n);
  } else if (src.dtype() == DType::BF16 && dst.dtype() == DType::F32) {
    launch(cast_kernel<bf16, float>, grid, 256, 0, st, src.data<bf16>(), dst.data<float>(), n);
  } else {
    throw Error(std::string("cast: ") + dtype_name(src.dtype()) + " -> " + dtype_name(dst.dtype()) +
                " is not supported");
  }
}

// ---------------------------------------------------------------- KV-cache store
// k/v parts of qkv row t -> caches at slot_mapping[t] (rows of Hkv*D elements); -1 skips. Elem is
// the cache's element: bf16 (copied) or uint8_t (FP8 E4M3 codes of value x inv_k / inv_v), 8
// values per step where the rows allow.
__device__ __forceinline__ void store8(const uint4& x, bf16* dst, int64_t i, float) {
  reinterpret_cast<uint4*>(dst)[i] = x;
}
__device__ __forceinline__ void store8(const uint4& x, uint8_t* dst, int64_t i, float inv) {
  float f[8];
  unpack8(x, f);
  reinterpret_cast<uint2*>(dst)[i] = pack8_e4m3(f, inv);
}
__device__ __forceinline__ void store1(bf16 x, bf16* dst, float) { *dst = x; }
__device__ __forceinline__ void store1(bf16 x, uint8_t* dst, float inv) {
  *dst = float_to_e4m3(__bfloat162float(x) * inv);
}

template <class Elem>
__global__ void store_kvcache_kernel(const bf16* __restrict__ qkv, Elem* __restrict__ kc, Elem* __restrict__ vc,
                                     const int32_t* __restrict__ slots, int64_t W, int64_t k_off, int64_t row, bool vec,
                                     float inv_k, float inv_v) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  const bf16* k = qkv + t * W + k_off;
  const bf16* v = k + row;
  Elem* kd = kc + slot * row;
  Elem* vd = vc + slot * row;
  if (vec) {
    for (int64_t i = threadIdx.x; i < row / 8; i += blockDim.x) {
      store8(reinterpret_cast<const uint4*>(k)[i], kd, i, inv_k);
      store8(reinterpret_cast<const uint4*>(v)[i], vd, i, inv_v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
      store1(k[i], kd + i, inv_k);
      store1(v[i], vd + i, inv_v);
    }
  }
}

void CudaBackend::store_kvcache(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int64_t num_heads,
                                int64_t num_kv_heads, int64_t head_dim, const AttentionMetadata& md,
                                KVScales kv_scales) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "store_kvcache");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  want_bf16(qkv, "store_kvcache", "qkv");
  const bool fp8 = k_cache.dtype() == DType::F8E4M3 && v_cache.dtype() == DType::F8E4M3;
  if (!fp8) {
    want_bf16(k_cache, "store_kvcache", "k_cache");
    want_bf16(v_cache, "store_kvcache", "v_cache");
  } else {
    check_kv_scales(kv_scales, "store_kvcache");
  }
  if (!md.d_slot_mapping.defined()) throw Error("store_kvcache: prepare_metadata() was not called for this batch");
  const int64_t T = qkv.size(0), W = qkv.size(1), row = num_kv_heads * head_dim;
  if (T == 0) return;
  const bool vec = row % 8 == 0 && (num_heads * head_dim) % 8 == 0 && W % 8 == 0;
  if (fp8) {
    launch(store_kvcache_kernel<uint8_t>, unsigned(T), 128, 0, on_stream(), qkv.data<bf16>(), k_cache.data<uint8_t>(),
           v_cache.data<uint8_t>(), md.d_slot_mapping.data<int32_t>(), W, num_heads * head_dim, row, vec,
           1.0f / kv_scales.k, 1.0f / kv_scales.v);
  } else {
    launch(store_kvcache_kernel<bf16>, unsigned(T), 128, 0, on_stream(), qkv.data<bf16>(), k_cache.data<bf16>(),
           v_cache.data<bf16>(), md.d_slot_mapping.data<int32_t>(), W, num_heads * head_dim, row, vec, 1.0f, 1.0f);
  }
}

}  // namespace nanovllm
