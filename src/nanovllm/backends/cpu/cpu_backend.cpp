// CPU backend: memory, embedding, norms, activation, row gather, cast, KV block copies.
#include "nanovllm/backends/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/utils/error.h"

extern "C" void openblas_set_num_threads(int);

namespace nanovllm {

// Waking the thread team costs more than small elementwise ops (decode at small batch).
static bool parallel_worth_it(int64_t elements) { return elements >= (1 << 16); }

std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuPrecision precision) {
  return std::make_unique<CpuBackend>(num_threads, precision);
}

// OpenMP is the forward's one thread pool; OpenBLAS runs inside its threads' shares, single-threaded
// (its own threads would spin against OpenMP's: ~30% of a decode step).
CpuBackend::CpuBackend(int num_threads, CpuPrecision precision) : precision_(precision) {
  if (num_threads > 0) omp_set_num_threads(num_threads);
  openblas_set_num_threads(1);
}

const float* weights_f32(const Tensor& w, std::vector<float>& scratch) {
  if (w.dtype() == DType::F32) return w.data<float>();
  if (w.dtype() != DType::BF16 && w.dtype() != DType::F16)
    throw Error(std::string("cpu: weights must be F32, BF16 or F16 (got ") + dtype_name(w.dtype()) + ")");
  scratch.resize(size_t(w.numel()));
  convert_to_f32(w.raw(), w.dtype(), scratch.size(), scratch.data());
  return scratch.data();
}

// Split over the threads in blocks of 64K elements (start-up: the dummy or checkpoint weights,
// ~1.2 GB for Qwen3-0.6B, go through here), BF16 rounded 16 lanes at a time; called from inside a
// parallel region (the dummy loader's threads each upload their own chunks), the caller's thread alone.
void CpuBackend::upload(const void* src, DType src_dtype, Tensor& dst) {
  const int64_t n = dst.numel();
  constexpr int64_t kBlock = int64_t(1) << 16;
  const char* in = static_cast<const char*>(src);
  const size_t in_es = dtype_size(src_dtype), out_es = dtype_size(dst.dtype());
  char* out = static_cast<char*>(dst.raw());
  if (dst.dtype() == DType::U4) {  // packed codes (two a byte): copied as they are
    if (src_dtype != DType::U4)
      throw Error(std::string("cpu upload: cannot convert ") + dtype_name(src_dtype) + " to U4");
    std::memcpy(out, in, dst.nbytes());
    return;
  }
  const bool to_bf16 = dst.dtype() == DType::BF16 && (src_dtype == DType::F32 || src_dtype == DType::F16);
  if (dst.dtype() != src_dtype && dst.dtype() != DType::F32 && !to_bf16)
    throw Error(std::string("cpu upload: cannot convert ") + dtype_name(src_dtype) + " to " + dtype_name(dst.dtype()));
#pragma omp parallel if (parallel_worth_it(n) && !omp_in_parallel())
  {
    std::vector<float> f(to_bf16 && src_dtype != DType::F32 ? size_t(kBlock) : 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      const char* s = in + size_t(i) * in_es;
      char* d = out + size_t(i) * out_es;
      if (dst.dtype() == src_dtype) {
        std::memcpy(d, s, size_t(m) * out_es);
      } else if (dst.dtype() == DType::F32) {
        convert_to_f32(s, src_dtype, size_t(m), reinterpret_cast<float*>(d));
      } else {  // to BF16 from F32 (rounded directly) or F16 (widened first)
        const float* x = reinterpret_cast<const float*>(s);
        if (src_dtype != DType::F32) {
          convert_to_f32(s, src_dtype, size_t(m), f.data());
          x = f.data();
        }
        cpu::round_to_bf16(x, m, reinterpret_cast<uint16_t*>(d));
      }
    }
  }
}

void CpuBackend::download(const Tensor& src, void* dst) { std::memcpy(dst, src.raw(), src.nbytes()); }

std::vector<float> CpuBackend::to_host_f32(const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  convert_to_f32(t.raw(), t.dtype(), out.size(), out.data());
  return out;
}

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) {
  check_embedding(ids, table, out);
  const int64_t T = ids.size(0), H = table.size(1), V = table.size(0);
  const int32_t* id = ids.data<int32_t>();
  // Ids past this table may belong to another rank's shard (tensor parallelism): the engine
  // validates ids against the whole vocabulary when a request comes in; negative ones never fit.
  for (int64_t t = 0; t < T; ++t)
    if (id[t] < 0) throw InvalidRequest("prompt", "token id " + std::to_string(id[t]) + " is negative");
#pragma omp parallel for if (parallel_worth_it(T * H))
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = int64_t(id[t]) - vocab_start;
    float* o = out.data<float>() + t * H;
    if (row < 0 || row >= V)
      std::memset(o, 0, size_t(H) * 4);
    else
      convert_to_f32(static_cast<const char*>(table.raw()) + size_t(row * H) * dtype_size(table.dtype()), table.dtype(),
                     size_t(H), o);
  }
}

// out[b, r * Vl + j] = parts[r, b, j]: one row copy per (rank, sequence).
void CpuBackend::merge_vocab_shards(const Tensor& parts, Tensor& out) {
  check_merge_vocab_shards(parts, out);
  const int64_t N = parts.size(0), B = parts.size(1), Vl = parts.size(2);
  const size_t es = dtype_size(parts.dtype()), row = size_t(Vl) * es;
  const char* in = static_cast<const char*>(parts.raw());
  char* o = static_cast<char*>(out.raw());
  for (int64_t r = 0; r < N; ++r)
    for (int64_t b = 0; b < B; ++b) std::memcpy(o + size_t(b * N + r) * row, in + size_t(r * B + b) * row, row);
}

static void rms_norm_row(const float* x, const float* w, float eps, int64_t n, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  check_rms_norm(x, w, out);
  const int64_t T = x.size(0), H = x.size(1);
  std::vector<float> scratch;
  const float* wf = weights_f32(w, scratch);
#pragma omp parallel for if (parallel_worth_it(T * H))
  for (int64_t t = 0; t < T; ++t) rms_norm_row(x.data<float>() + t * H, wf, eps, H, out.data<float>() + t * H);
}

void CpuBackend::add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) {
  check_rms_norm(x, w, residual);
  const int64_t T = x.size(0), H = x.size(1);
  std::vector<float> scratch;
  const float* wf = weights_f32(w, scratch);
#pragma omp parallel for if (parallel_worth_it(T * H))
  for (int64_t t = 0; t < T; ++t) {
    float* xr = x.data<float>() + t * H;
    float* rr = residual.data<float>() + t * H;
    for (int64_t i = 0; i < H; ++i) rr[i] += xr[i];
    rms_norm_row(rr, wf, eps, H, xr);
  }
}

void CpuBackend::silu_and_mul(const Tensor& x, Tensor& out) {
  check_silu_and_mul(x, out);
  const int64_t T = out.size(0), I = out.size(1);
#pragma omp parallel for if (parallel_worth_it(T * I))
  for (int64_t t = 0; t < T; ++t) {
    const float* g = x.data<float>() + t * 2 * I;
    const float* u = g + I;
    float* o = out.data<float>() + t * I;
    for (int64_t i = 0; i < I; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void CpuBackend::gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) {
  check_gather_rows(x, rows, out);
  const int64_t H = x.size(1);
  for (size_t b = 0; b < rows.size(); ++b)
    std::memcpy(out.data<float>() + int64_t(b) * H, x.data<float>() + int64_t(rows[b]) * H, size_t(H) * 4);
}

// The CPU backend computes in F32 only: a cast is a copy between F32 tensors.
void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  check_cast(src, dst);
  if (src.dtype() == dst.dtype()) {  // a copy (I32 token ids too)
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return;
  }
  if (src.dtype() != DType::F32 || dst.dtype() != DType::F32)
    throw Error(std::string("cast: the CPU backend holds F32 activations only (got ") + dtype_name(src.dtype()) +
                " -> " + dtype_name(dst.dtype()) + ")");
  std::copy(src.data<float>(), src.data<float>() + src.numel(), dst.data<float>());
}

// Each plane's leading slots of the source block over the destination's: memcpy of num_slots rows.
void CpuBackend::copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) {
  check_copy_kv_blocks(cache, copies);
  const int64_t P = cache.size(0), blocks = cache.size(1);
  const size_t slot = size_t(cache.size(3)) * dtype_size(cache.dtype()), block = slot * size_t(cache.size(2));
  char* base = static_cast<char*>(cache.raw());
  for (const KVBlockCopy& c : copies)
    for (int64_t p = 0; p < P; ++p) {
      char* plane = base + size_t(p * blocks) * block;
      std::memcpy(plane + size_t(c.dst_block) * block, plane + size_t(c.src_block) * block, size_t(c.num_slots) * slot);
    }
}

}  // namespace nanovllm
