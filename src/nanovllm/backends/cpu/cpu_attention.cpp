// Paged KV cache write and causal paged attention on the CPU (the reference for CUDA).
// Caches: [num_blocks, block_size, Hkv, D]; token j of sequence b lives in slot
// block_tables[b][j / block_size] * block_size + j % block_size.
// Sequence b computes q tokens cu_seqlens_q[b]..cu_seqlens_q[b+1]) which are the last of its
// context_lens[b] keys; new token i (0-based among them) sees keys [0, ctx - qlen + i], or with a
// sliding window W only the last W of them, [ctx - qlen + i - W + 1, ctx - qlen + i].
// Caches are F32 (the act dtype), BF16 (--kv-cache-dtype bf16: rounded to nearest even when stored,
// widened with vector loads when read) or F8E4M3 (--kv-cache-dtype fp8: stored as e4m3(x / scale),
// read back through a 256-entry table of code x scale); both read into a row buffer, then the same
// FP32 math. The softmax is the exact path's (std::exp, a double sum) or with CpuPrecision::Fast a
// vector one (cpu_vec.h); both task orders below use the same one.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/backends/cpu/cpu_vec.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/fp8.h"

namespace nanovllm {

namespace {

// The caches are F32, BF16 or F8E4M3, both the same; FP8 scales must be positive and finite.
DType cache_dtype(const Tensor& k_cache, const Tensor& v_cache, KVScales s, const char* op) {
  const DType d = k_cache.dtype();
  if (d != v_cache.dtype() || (d != DType::F32 && d != DType::BF16 && d != DType::F8E4M3))
    throw Error(std::string(op) + ": k_cache and v_cache must both be F32, BF16 or F8E4M3, got " + dtype_name(d) +
                " and " + dtype_name(v_cache.dtype()));
  check_kv_scales(s, op);
  return d;
}

void quantize_row(const float* src, uint8_t* dst, int64_t n, float inv_scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_e4m3(src[i] * inv_scale);
}

// code -> code's value x scale.
std::vector<float> fp8_table(float scale) {
  std::vector<float> t(256);
  for (int c = 0; c < 256; ++c) t[size_t(c)] = e4m3_to_f32(uint8_t(c)) * scale;
  return t;
}

// Writes `row` floats of src into slot `slot` of a cache of any of the three dtypes.
void store_row(const float* src, Tensor& cache, int64_t slot, int64_t row, float inv_scale) {
  switch (cache.dtype()) {
    case DType::F8E4M3: return quantize_row(src, cache.data<uint8_t>() + slot * row, row, inv_scale);
    case DType::BF16: return cpu::round_to_bf16(src, row, cache.data<uint16_t>() + slot * row);
    default: std::memcpy(cache.data<float>() + slot * row, src, size_t(row) * 4);
  }
}

// Row `slot`, head kvh of a cache as floats: in place for F32, else decoded into buf (FP8 through
// `table`, BF16 widened).
const float* cache_row(const Tensor& cache, int64_t slot, int64_t kv_row, int64_t kvh, int64_t D, const float* table,
                       float* buf) {
  const int64_t at = slot * kv_row + kvh * D;
  if (cache.dtype() == DType::F32) return cache.data<float>() + at;
  if (cache.dtype() == DType::BF16) {
    cpu::widen_bf16(cache.data<uint16_t>() + at, D, buf);
    return buf;
  }
  const uint8_t* codes = cache.data<uint8_t>() + at;
  for (int64_t d = 0; d < D; ++d) buf[d] = table[codes[d]];
  return buf;
}

}  // namespace

void CpuBackend::store_kvcache(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int64_t num_heads,
                               int64_t num_kv_heads, int64_t head_dim, const AttentionMetadata& md,
                               KVScales kv_scales) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "store_kvcache");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  cache_dtype(k_cache, v_cache, kv_scales, "store_kvcache");
  const int64_t T = qkv.size(0), W = qkv.size(1), row = num_kv_heads * head_dim;
  const float inv_k = 1.0f / kv_scales.k, inv_v = 1.0f / kv_scales.v;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t slot = md.slot_mapping[size_t(t)];
    if (slot < 0) continue;
    const float* src = qkv.data<float>() + t * W + num_heads * head_dim;
    store_row(src, k_cache, slot, row, inv_k);
    store_row(src + row, v_cache, slot, row, inv_v);
  }
}

namespace {

// Where query token t's keys are: sequence b, keys [first, first + nkeys) (causal, windowed).
struct KeySpan {
  int64_t b, first, nkeys;
};

// Keys per block of the key-major order: a multiple of dots_f32's four, so its groups of four
// rows are the same as over all keys at once.
constexpr int64_t kKeyBlock = 16;

// The kv-head groups a token's task covers in the key-major order: enough tasks for the threads
// (a divisor of Hkv).
int64_t kv_groups(int64_t T, int64_t num_kv_heads, int threads) {
  const int64_t want = (2 * int64_t(threads) + T - 1) / T;
  int64_t g = 1;
  while (g < want && g < num_kv_heads) {
    ++g;
    while (num_kv_heads % g != 0) ++g;
  }
  return g;
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                           int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                           const AttentionMetadata& md, int64_t sliding_window, KVScales kv_scales,
                           const ReadAhead& /*then: nothing to read ahead into*/) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "attention");
  check_sliding_window(sliding_window, "attention");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  const DType cdt = cache_dtype(k_cache, v_cache, kv_scales, "attention");
  const bool fp8 = cdt == DType::F8E4M3, decoded = cdt != DType::F32;
  const std::vector<float> k_table = fp8 ? fp8_table(kv_scales.k) : std::vector<float>();
  const std::vector<float> v_table = fp8 ? fp8_table(kv_scales.v) : std::vector<float>();
  const float* kt = fp8 ? k_table.data() : nullptr;
  const float* vt = fp8 ? v_table.data() : nullptr;
  const int64_t T = qkv.size(0), W = qkv.size(1), D = head_dim, bs = k_cache.size(1);
  const int64_t group = num_heads / num_kv_heads, kv_row = num_kv_heads * D;
  if (out.dim() != 2 || out.size(0) != T || out.size(1) != num_heads * D)
    throw Error("attention: out must be [T, Hq*D], got " + shape_str(out.shape()));
  std::vector<KeySpan> spans(static_cast<size_t>(T));
  for (int64_t b = 0; b < md.num_seqs; ++b) {
    const int64_t q0 = md.cu_seqlens_q[size_t(b)], qlen = md.cu_seqlens_q[size_t(b + 1)] - q0;
    for (int64_t i = 0; i < qlen; ++i) {
      const int64_t last = md.context_lens[size_t(b)] - qlen + i;  // causal: keys [first, last]
      const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, last - sliding_window + 1) : 0;
      spans[size_t(q0 + i)] = {b, first, last - first + 1};
    }
  }
  // The exact path's softmax, or the fast path's vector one: the same for every task order below.
  const auto softmax = precision_ == CpuPrecision::Fast ? cpu::softmax_fast : cpu::softmax_exact;
  auto slot_of = [&](const KeySpan& s, int64_t j) {
    const int64_t key = s.first + j;
    return int64_t(md.block_tables[size_t(s.b * md.max_blocks + key / bs)]) * bs + key % bs;
  };
  // Every (token, head) gets the same sums in either order below: dots_f32 per key (in the same
  // groups of four), the same softmax, and weighted_sum_f32's FMAs in key order (y through memory
  // between blocks is exact), so the choice does not change a bit (batch invariance).
  // Few query tokens per sequence (decode): key-major. A task is a token and a group of kv heads;
  // it walks its keys in blocks of 16 cache rows, every head of the group per block, so it reads
  // the cache's rows (all kv heads side by side) in order, not one head's 512 bytes per 4 KB row.
  if (T <= 2 * md.num_seqs) {
    const int64_t groups = kv_groups(T, num_kv_heads, omp_get_max_threads()), per = num_kv_heads / groups;
#pragma omp parallel if (T * groups >= 2)
    {
      std::vector<float> scores, rows(decoded ? size_t(kKeyBlock * D) : 0);
      std::vector<const float*> ptrs(kKeyBlock);
      // The block's rows of kv head kvh (in place, or decoded into `rows`).
      auto block_rows = [&](const Tensor& cache, const float* table, const KeySpan& s, int64_t j0, int64_t jn,
                            int64_t kvh) {
        for (int64_t r = 0; r < jn; ++r)
          ptrs[size_t(r)] = cache_row(cache, slot_of(s, j0 + r), kv_row, kvh, D, table, rows.data() + r * D);
      };
#pragma omp for schedule(dynamic)
      for (int64_t task = 0; task < T * groups; ++task) {
        const int64_t t = task / groups, kv0 = task % groups * per, h0 = kv0 * group, nh = per * group;
        const KeySpan& s = spans[size_t(t)];
        scores.resize(size_t(nh * s.nkeys));
        for (int64_t j0 = 0; j0 < s.nkeys; j0 += kKeyBlock) {
          const int64_t jn = std::min(kKeyBlock, s.nkeys - j0);
          for (int64_t kvh = kv0; kvh < kv0 + per; ++kvh) {
            block_rows(k_cache, kt, s, j0, jn, kvh);
            for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
              cpu::dots_f32(qkv.data<float>() + t * W + h * D, ptrs.data(), jn, D,
                            scores.data() + (h - h0) * s.nkeys + j0);
          }
        }
        for (int64_t h = 0; h < nh; ++h) softmax(scores.data() + h * s.nkeys, s.nkeys, scale);
        float* o = out.data<float>() + t * num_heads * D + h0 * D;
        std::fill(o, o + nh * D, 0.0f);
        for (int64_t j0 = 0; j0 < s.nkeys; j0 += kKeyBlock) {
          const int64_t jn = std::min(kKeyBlock, s.nkeys - j0);
          for (int64_t kvh = kv0; kvh < kv0 + per; ++kvh) {
            block_rows(v_cache, vt, s, j0, jn, kvh);
            for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
              cpu::weighted_sum_f32(scores.data() + (h - h0) * s.nkeys + j0, ptrs.data(), jn, D, o + (h - h0) * D);
          }
        }
      }
    }
    return;
  }
  // Many query tokens per sequence (prefill): head-major tasks, so consecutive tasks read the same
  // head's keys and values (a 512-token prefill's are 512 KB: in L2), not every head's in turn. A
  // task takes two consecutive queries; when they are one sequence's with the same first key (no
  // window cut), the second's keys extend the first's and both share the loads of their common keys
  // (dots2_f32 / weighted_sum2_f32: each query's sums are those of its own call).
  const int64_t pairs = (T + 1) / 2;
#pragma omp parallel if (T * num_heads >= 8)
  {
    std::vector<float> scores0, scores1, k_rows, v_rows;  // BF16 / FP8 caches: the keys and values decoded
    std::vector<const float*> keys, values;
    // The rows of span s's keys for kv head kvh into keys / values.
    auto gather = [&](const KeySpan& s, int64_t kvh) {
      keys.resize(size_t(s.nkeys));
      values.resize(size_t(s.nkeys));
      if (decoded) {
        k_rows.resize(size_t(s.nkeys * D));
        v_rows.resize(size_t(s.nkeys * D));
      }
      for (int64_t j = 0; j < s.nkeys; ++j) {
        const int64_t slot = slot_of(s, j);
        keys[size_t(j)] = cache_row(k_cache, slot, kv_row, kvh, D, kt, decoded ? k_rows.data() + j * D : nullptr);
        values[size_t(j)] = cache_row(v_cache, slot, kv_row, kvh, D, vt, decoded ? v_rows.data() + j * D : nullptr);
      }
    };
    auto query = [&](int64_t t, int64_t h) { return qkv.data<float>() + t * W + h * D; };
    auto output = [&](int64_t t, int64_t h) {
      float* o = out.data<float>() + t * num_heads * D + h * D;
      std::fill(o, o + D, 0.0f);
      return o;
    };
    auto single = [&](int64_t t, int64_t h) {
      const KeySpan& s = spans[size_t(t)];
      gather(s, h / group);
      scores0.resize(size_t(s.nkeys));
      cpu::dots_f32(query(t, h), keys.data(), s.nkeys, D, scores0.data());
      softmax(scores0.data(), s.nkeys, scale);
      cpu::weighted_sum_f32(scores0.data(), values.data(), s.nkeys, D, output(t, h));
    };
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < pairs * num_heads; ++task) {
      const int64_t h = task / pairs, t0 = task % pairs * 2, t1 = t0 + 1;
      if (t1 >= T) {
        single(t0, h);
        continue;
      }
      const KeySpan &a = spans[size_t(t0)], &b = spans[size_t(t1)];
      if (a.b != b.b || a.first != b.first || b.nkeys < a.nkeys) {
        single(t0, h);
        single(t1, h);
        continue;
      }
      gather(b, h / group);  // a's keys are its first a.nkeys
      const int64_t n0 = a.nkeys, n1 = b.nkeys;
      scores0.resize(size_t(n0));
      scores1.resize(size_t(n1));
      cpu::dots2_f32(query(t0, h), query(t1, h), keys.data(), n0, D, scores0.data(), scores1.data());
      cpu::dots_f32(query(t1, h), keys.data() + n0, n1 - n0, D, scores1.data() + n0);
      softmax(scores0.data(), n0, scale);
      softmax(scores1.data(), n1, scale);
      float *o0 = output(t0, h), *o1 = output(t1, h);
      cpu::weighted_sum2_f32(scores0.data(), scores1.data(), values.data(), n0, D, o0, o1);
      cpu::weighted_sum_f32(scores1.data() + n0, values.data() + n0, n1 - n0, D, o1);
    }
  }
}

}  // namespace nanovllm
