// Helpers of the GPU tests: the CPU backend is the oracle, fed the same BF16-rounded inputs.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::test {

#define REQUIRE_GPU()                                            \
  do {                                                           \
    if (!::nanovllm::cuda_available()) GTEST_SKIP() << "no GPU"; \
  } while (0)

inline float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Uniform(lo, hi) values, rounded to BF16 so that both backends see identical inputs.
inline std::vector<float> rand_bf16(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_round(d(g));
  return v;
}

// The oracle and the device under test, side by side (kernel options for the CUDA one).
// `cpu_results` keeps the oracle's outputs of a case by its inputs' key within one test, so a case
// run again on another CUDA kernel (the attention tests run one batch through every prefill kernel)
// pays the CPU reference once.
struct Backends {
  explicit Backends(const KernelOptions& o = {}) : gpu(0, o) {}
  CpuBackend cpu{0};  // OpenMP's default: OMP_NUM_THREADS, which gpu_build_test.sh sets per test job
  CudaBackend gpu;
  std::map<std::string, std::vector<std::vector<float>>> cpu_results;
};

// The oracle's outputs of the case named `key`: computed by `compute` the first time a test asks.
inline const std::vector<std::vector<float>>& cpu_reference(
    Backends& be, const std::string& key, const std::function<std::vector<std::vector<float>>()>& compute) {
  auto it = be.cpu_results.find(key);
  if (it == be.cpu_results.end()) it = be.cpu_results.emplace(key, compute()).first;
  return it->second;
}

struct Pair {
  Tensor cpu, gpu;
};

// A token's logprobs from the GPU against the CPU's: the logprob and the top N within `tol`, the
// same rank and top ids. `where` names the case in failures.
inline void expect_same_logprobs(const TokenLogprobs& got, const TokenLogprobs& want, const std::string& where,
                                 float tol = 1e-4f) {
  EXPECT_NEAR(got.logprob, want.logprob, tol) << where;
  EXPECT_EQ(got.rank, want.rank) << where;
  ASSERT_EQ(got.top.size(), want.top.size()) << where;
  for (size_t k = 0; k < want.top.size(); ++k) {
    EXPECT_EQ(got.top[k].first, want.top[k].first) << where << " rank " << k;
    EXPECT_NEAR(got.top[k].second, want.top[k].second, tol) << where << " rank " << k;
  }
}

// The same values as an F32 CPU tensor and a `gpu_dtype` CUDA tensor.
inline Pair make_pair(CpuBackend& cpu, CudaBackend& gpu, const Shape& shape, const std::vector<float>& v,
                      DType gpu_dtype = DType::BF16) {
  Pair p{cpu.empty(shape, DType::F32), gpu.empty(shape, gpu_dtype)};
  cpu.upload(v.data(), DType::F32, p.cpu);
  gpu.upload(v.data(), DType::F32, p.gpu);
  return p;
}
inline Pair make_i32(CpuBackend& cpu, CudaBackend& gpu, const std::vector<int32_t>& v) {
  Pair p{cpu.empty({int64_t(v.size())}, DType::I32), gpu.empty({int64_t(v.size())}, DType::I32)};
  cpu.upload(v.data(), DType::I32, p.cpu);
  gpu.upload(v.data(), DType::I32, p.gpu);
  return p;
}

struct SeqSpec {
  int32_t ctx, qlen;  // context length (cached + new) and new tokens this step
};

// One step's attention metadata over shuffled blocks of bs slots (3 spare blocks nobody uses), and
// the slots of the keys before each sequence's new tokens (cached: the test writes them itself).
struct PagedBatch {
  AttentionMetadata md;
  int64_t nblocks = 0;
  std::vector<int64_t> cached_slots;
};

inline PagedBatch paged_batch(const std::vector<SeqSpec>& seqs, int64_t bs, bool is_prefill, uint32_t seed) {
  PagedBatch pb;
  int64_t max_blocks = 0, T = 0;
  for (auto& s : seqs) {
    const int64_t nb = (s.ctx + bs - 1) / bs;
    pb.nblocks += nb;
    max_blocks = std::max(max_blocks, nb);
    T += s.qlen;
  }
  pb.nblocks += 3;
  std::vector<int32_t> pool(static_cast<size_t>(pb.nblocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(seed));
  AttentionMetadata& md = pb.md;
  md.is_prefill = is_prefill;
  md.num_seqs = int64_t(seqs.size());
  md.num_tokens = T;
  md.max_blocks = max_blocks;
  md.cu_seqlens_q.push_back(0);
  md.cu_seqlens_k.push_back(0);
  size_t next = 0;
  for (auto& s : seqs) {
    const int64_t nb = (s.ctx + bs - 1) / bs;
    std::vector<int32_t> table(pool.begin() + int64_t(next), pool.begin() + int64_t(next + size_t(nb)));
    next += size_t(nb);
    for (int64_t i = 0; i < max_blocks; ++i) md.block_tables.push_back(i < nb ? table[size_t(i)] : -1);
    for (int32_t j = 0; j < s.ctx; ++j) {
      const int64_t slot = int64_t(table[size_t(j / bs)]) * bs + j % bs;
      if (j < s.ctx - s.qlen)
        pb.cached_slots.push_back(slot);
      else
        md.slot_mapping.push_back(int32_t(slot));
    }
    md.cu_seqlens_q.push_back(md.cu_seqlens_q.back() + s.qlen);
    md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + s.ctx);
    md.max_seqlen_q = std::max(md.max_seqlen_q, s.qlen);
    md.max_seqlen_k = std::max(md.max_seqlen_k, s.ctx);
    md.context_lens.push_back(s.ctx);
  }
  return pb;
}

struct ErrStats {
  double max_abs = 0, rel_l2 = 0;  // max |a - b|, ||a - b|| / ||b||
  size_t nonfinite = 0;
};

inline ErrStats compare(const std::vector<float>& got, const std::vector<float>& ref) {
  ErrStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) ++s.nonfinite;
    const double d = double(got[i]) - ref[i];
    s.max_abs = std::max(s.max_abs, std::abs(d));
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

// Checks and prints "[gpu] name: max_abs .. rel_l2 .." (grepped into the test log summary).
inline void expect_close(const std::string& name, const std::vector<float>& got, const std::vector<float>& ref,
                         double rel_tol, double abs_tol) {
  ASSERT_EQ(got.size(), ref.size()) << name;
  auto s = compare(got, ref);
  std::printf("[gpu] %s: max_abs %.3e rel_l2 %.3e (tol rel %.0e abs %.0e)\n", name.c_str(), s.max_abs, s.rel_l2,
              rel_tol, abs_tol);
  EXPECT_EQ(s.nonfinite, 0u) << name;
  EXPECT_LT(s.rel_l2, rel_tol) << name;
  EXPECT_LT(s.max_abs, abs_tol) << name;
}

// One prefill sequence of T new tokens (no cached ones) whose k/v go to `slots` (T entries; -1:
// none) in cache blocks 0 .. nblocks - 1 in order.
inline AttentionMetadata one_prefill_metadata(int64_t T, const std::vector<int32_t>& slots, int64_t nblocks) {
  AttentionMetadata md;
  md.is_prefill = true;
  md.num_seqs = 1;
  md.num_tokens = T;
  md.cu_seqlens_q = {0, int32_t(T)};
  md.cu_seqlens_k = {0, int32_t(T)};
  md.max_seqlen_q = md.max_seqlen_k = int32_t(T);
  md.slot_mapping = slots;
  md.context_lens = {int32_t(T)};
  md.max_blocks = nblocks;
  for (int64_t b = 0; b < nblocks; ++b) md.block_tables.push_back(int32_t(b));
  return md;
}

}  // namespace nanovllm::test
