// Structured output's token masks in the CUDA sampler (SamplingRow::allowed) against the CPU
// backend: batches of 17 rows mixing masked and unmasked rows, greedy and sampled, with and without
// top-k / top-p, penalties and logprobs (raw and processed), at Qwen3's vocabulary (151,936) and at
// one that is not a multiple of 32 (1,003), F32 and BF16 logits; a one-token mask, an impossible
// row (its one allowed token banned: token 0), more masked rows than the first buffer holds, and
// sample_async.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gpu_test_util.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cuda/cuda_backend.h"

using namespace nanovllm;
using namespace nanovllm::test;

namespace {

// Row b's mask: about `fraction` of the vocabulary, packed (bit t % 32 of word t / 32).
std::vector<uint32_t> random_mask(int64_t V, double fraction, std::mt19937& rng) {
  std::vector<uint32_t> m(size_t((V + 31) / 32), 0);
  std::bernoulli_distribution keep(fraction);
  for (int64_t t = 0; t < V; ++t)
    if (keep(rng)) m[size_t(t / 32)] |= 1u << (t % 32);
  m[size_t((V - 1) / 32)] |= 1u << ((V - 1) % 32);  // the last token, in the partial word
  return m;
}

// N(0, 2) logits (the CPU and GPU see the same values, rounded to BF16 where the GPU's are).
std::vector<float> normal_logits(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

bool allowed(const std::vector<uint32_t>& m, int32_t t) { return (m[size_t(t / 32)] >> (t % 32)) & 1u; }

// Samples `rows` over `logits` [B, V] on both backends; expects the same tokens (and logprobs
// where asked) and, for masked rows, an allowed token.
void expect_same(CpuBackend& cpu, CudaBackend& gpu, const std::vector<float>& logits, int64_t B, int64_t V, DType dt,
                 const std::vector<SamplingRow>& rows, const std::vector<std::vector<uint32_t>>& masks,
                 const char* what) {
  std::vector<float> l = logits;
  if (dt == DType::BF16)
    for (auto& x : l) x = bf16_round(x);
  const Pair in = make_pair(cpu, gpu, {B, V}, l, dt);
  const bool any_lp = std::any_of(rows.begin(), rows.end(), [](auto& r) { return r.num_logprobs >= 0; });
  std::vector<TokenLogprobs> clp, glp;
  const auto want = cpu.sample(in.cpu, rows, any_lp ? &clp : nullptr);
  const auto got = gpu.sample(in.gpu, rows, any_lp ? &glp : nullptr);
  int mism = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = rows[size_t(b)];
    EXPECT_EQ(got[size_t(b)], want[size_t(b)]) << what << " V " << V << " " << dtype_name(dt) << " row " << b;
    mism += got[size_t(b)] != want[size_t(b)];
    if (r.allowed && !masks.empty()) {
      EXPECT_TRUE(allowed(masks[size_t(b)], got[size_t(b)])) << what << " row " << b << " token " << got[size_t(b)];
    }
    if (r.num_logprobs < 0 || got[size_t(b)] != want[size_t(b)]) continue;
    expect_same_logprobs(glp[size_t(b)], clp[size_t(b)], std::string(what) + " row " + std::to_string(b));
  }
  std::printf("[gpu] masked sampling (%s) V=%lld %s: %d/%lld rows differ from the CPU\n", what, (long long)V,
              dtype_name(dt), mism, (long long)B);
}

}  // namespace

TEST(CudaSamplingMask, MaskedRowsMatchTheCpu) {
  REQUIRE_GPU();
  Backends be;
  CpuBackend& cpu = be.cpu;
  CudaBackend& gpu = be.gpu;
  for (int64_t V : {int64_t(151936), int64_t(1003)}) {
    const int64_t B = 17;
    std::mt19937 rng{uint32_t(V) + 1};
    const std::vector<float> logits = normal_logits(B * V, rng);
    std::vector<std::vector<uint32_t>> masks;
    for (int64_t b = 0; b < B; ++b) masks.push_back(random_mask(V, b % 3 == 0 ? 0.002 : 0.2, rng));
    std::vector<LogitsProcessing> procs(static_cast<size_t>(B));
    std::vector<SamplingRow> plain, mixed;
    for (int64_t b = 0; b < B; ++b) {
      SamplingRow r;
      r.temperature = b % 4 == 2 ? 0.0f : 0.8f;
      r.top_k = b % 5 == 3 ? 40 : 0;
      r.top_p = b % 5 == 4 ? 0.9f : 1.0f;
      r.seed = 100 + uint64_t(b);
      r.position = 7 + b;
      if (b % 4 != 1) r.allowed = masks[size_t(b)].data();  // rows 1, 5, 9, 13 unconstrained
      plain.push_back(r);
      LogitsProcessing& p = procs[size_t(b)];
      p.repetition_penalty = 1.3f;
      p.entries = {{int32_t(rng() % V), 2, kAdjustSeen, 0.f}, {int32_t(rng() % V), 0, 0, 5.0f}};
      if (b % 2 == 0) r.processing = &p;
      r.num_logprobs = b % 3 == 1 ? -1 : int(b % 5);
      r.processed_logprobs = b % 4 == 0;
      mixed.push_back(r);
    }
    for (DType dt : {DType::F32, DType::BF16}) {
      expect_same(cpu, gpu, logits, B, V, dt, plain, masks, "masks only");
      expect_same(cpu, gpu, logits, B, V, dt, mixed, masks, "masks, processing, logprobs");
    }
  }
}

TEST(CudaSamplingMask, OneTokenMasksForceTheirTokenAndImpossibleRowsGetTokenZero) {
  REQUIRE_GPU();
  Backends be;
  CpuBackend& cpu = be.cpu;
  CudaBackend& gpu = be.gpu;
  const int64_t B = 17, V = 151936;
  std::mt19937 rng{9};
  const std::vector<float> logits = normal_logits(B * V, rng);
  std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(B), std::vector<uint32_t>(size_t((V + 31) / 32), 0));
  std::vector<int32_t> forced;
  LogitsProcessing ban;
  std::vector<SamplingRow> rows;
  for (int64_t b = 0; b < B; ++b) {
    forced.push_back(b == 0 ? int32_t(V - 1) : int32_t(rng() % V));
    masks[size_t(b)][size_t(forced.back() / 32)] |= 1u << (forced.back() % 32);
    SamplingRow r;
    r.temperature = b % 2 ? 1.5f : 0.0f;
    r.top_p = b % 3 == 0 ? 0.5f : 1.0f;
    r.seed = uint64_t(b);
    r.allowed = masks[size_t(b)].data();
    rows.push_back(r);
  }
  ban.entries = {{forced[16], 0, kAdjustBanned, 0.f}};
  rows[16].processing = &ban;  // its one allowed token banned: every logit -inf
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<float> l = logits;
    Tensor gl = gpu.empty({B, V}, dt);
    gpu.upload(l.data(), DType::F32, gl);
    const auto got = gpu.sample(gl, rows);
    for (int64_t b = 0; b < 16; ++b) EXPECT_EQ(got[size_t(b)], forced[size_t(b)]) << dtype_name(dt) << " row " << b;
    EXPECT_EQ(got[16], 0) << dtype_name(dt);
  }
  // The same through the split sampler's path (no filters, one row: several CTAs per row).
  std::vector<SamplingRow> one = {rows[3]};
  one[0].top_p = 1.0f;
  const Pair in = make_pair(cpu, gpu, {1, V}, {logits.begin() + 3 * V, logits.begin() + 4 * V}, DType::F32);
  EXPECT_EQ(gpu.sample(in.gpu, one)[0], forced[3]);
  EXPECT_EQ(cpu.sample(in.cpu, one)[0], forced[3]);
}

// More masked rows than the first mask buffer holds (512 rows), then a small batch again, and the
// async entry point: the same tokens as the CPU.
TEST(CudaSamplingMask, ManyMaskedRowsAndSampleAsync) {
  REQUIRE_GPU();
  Backends be;
  CpuBackend& cpu = be.cpu;
  CudaBackend& gpu = be.gpu;
  const int64_t V = 1003;
  for (int64_t B : {int64_t(600), int64_t(17)}) {
    std::mt19937 rng{uint32_t(B)};
    const std::vector<float> logits = normal_logits(B * V, rng);
    std::vector<std::vector<uint32_t>> masks;
    std::vector<SamplingRow> rows;
    for (int64_t b = 0; b < B; ++b) masks.push_back(random_mask(V, 0.1, rng));
    for (int64_t b = 0; b < B; ++b) {
      SamplingRow r;
      r.temperature = b % 2 ? 0.9f : 0.0f;
      r.seed = uint64_t(b);
      r.position = b;
      r.allowed = masks[size_t(b)].data();
      rows.push_back(r);
    }
    expect_same(cpu, gpu, logits, B, V, DType::F32, rows, masks, B > 512 ? "600 rows" : "17 rows after 600");
    const Pair in = make_pair(cpu, gpu, {B, V}, logits, DType::F32);
    Backend::SampledTokens t = gpu.sample_async(in.gpu, rows);
    EXPECT_EQ(gpu.wait_tokens(t), cpu.sample(in.cpu, rows)) << "sample_async, B " << B;
  }
}
