// Fused q/k RMSNorm + RoPE + KV-cache store micro-benchmark (a program, not a test):
// CudaBackend::qk_norm_rope_store under each rope_kernel value (head: qk_norm_rope.cu's kernel;
// token: qk_norm_rope_tokens.cu's; auto: what the engine runs), at Qwen3-0.6B's heads (16 q, 8 kv,
// D 128) and Qwen3-8B's (32, 8, 128), BF16 cache, with the q/k norm, plain RoPE. Each variant runs
// as a CUDA graph of `reps` back-to-back calls (as a decode step replays them; PDL between them),
// timed over a few replays after a warm-up one; qkv is rewritten in place each call (the timing
// does not depend on the values). Prints one JSON line per (model, T): microseconds per call of
// each kernel, the kernel auto takes, the bytes one call moves (qkv read, q/k written back, k/v
// written to the cache) and the token kernel's GB/s.
//
// Usage: rope_bench [T ...]   (default 1 16 64 128 256 1024 4096 16384)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "nanovllm/backends/attention_metadata.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/rope_params.h"

using namespace nanovllm;

namespace {

Tensor upload_random(CudaBackend& be, const Shape& shape, uint32_t seed, float lo, float hi) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : v) x = d(rng);
  Tensor t = be.empty(shape, DType::BF16);
  be.upload(v.data(), DType::F32, t);
  return t;
}

struct Model {
  const char* name;
  int64_t hq, hkv, d;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(std::atoll(argv[i]));
  if (Ts.empty()) Ts = {1, 16, 64, 128, 256, 1024, 4096, 16384};
  CudaBackend be(0);
  for (const Model& m : {Model{"qwen3-0.6b", 16, 8, 128}, Model{"qwen3-8b", 32, 8, 128}}) {
    for (int64_t T : Ts) {
      be.begin_step();  // the previous T's tensors are gone: rewind the arena
      const int64_t W = (m.hq + 2 * m.hkv) * m.d, bs = 256, nblocks = (T + bs - 1) / bs;
      Tensor qkv = upload_random(be, {T, W}, 1, -2, 2);
      Tensor qw = upload_random(be, {m.d}, 2, 0.5, 1.5), kw = upload_random(be, {m.d}, 3, 0.5, 1.5);
      std::vector<int32_t> pos(static_cast<size_t>(T));
      std::iota(pos.begin(), pos.end(), 0);
      Tensor p = be.empty({T}, DType::I32);
      be.upload(pos.data(), DType::I32, p);
      Tensor kc = be.empty({nblocks, bs, m.hkv, m.d}, DType::BF16),
             vc = be.empty({nblocks, bs, m.hkv, m.d}, DType::BF16);
      AttentionMetadata md;
      md.is_prefill = true;
      md.num_seqs = 1;
      md.num_tokens = T;
      md.max_blocks = nblocks;
      md.cu_seqlens_q = {0, int32_t(T)};
      md.cu_seqlens_k = {0, int32_t(T)};
      md.max_seqlen_q = md.max_seqlen_k = int32_t(T);
      md.context_lens = {int32_t(T)};
      for (int64_t b = 0; b < nblocks; ++b) md.block_tables.push_back(int32_t(b));
      md.slot_mapping = pos;  // blocks in order: slot = position
      be.prepare_metadata(md);
      const RopeParams rope = RopeParams::plain(m.d, 1e6);
      const int reps = T <= 256 ? 100 : T <= 4096 ? 20 : 5;
      auto time_us = [&](RopeKernel k) {
        be.set_rope_kernel(k);
        be.graph_capture_begin();
        for (int i = 0; i < reps; ++i) be.qk_norm_rope_store(qkv, qw, kw, p, kc, vc, m.hq, m.hkv, m.d, 1e-6f, rope, md);
        const int64_t g = be.graph_capture_end();
        be.graph_replay(g);  // warm-up
        be.synchronize();
        const int replays = 5;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < replays; ++i) be.graph_replay(g);
        be.synchronize();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        be.graph_destroy(g);
        return s / (replays * reps) * 1e6;
      };
      const double head = time_us(RopeKernel::Head), token = time_us(RopeKernel::Token);
      const double autok = time_us(RopeKernel::Auto);
      be.set_rope_kernel(RopeKernel::Auto);
      const bool auto_token =
          be.plan_qk_norm_rope({T, m.hq, m.hkv, m.d, true, true}).kernel == cuda::QkNormRopeKernel::Token;
      const double bytes = double(T) * double(W * 2 + (m.hq + m.hkv) * m.d * 2 + 2 * m.hkv * m.d * 2);
      std::printf(
          "{\"model\": \"%s\", \"T\": %lld, \"head_us\": %.2f, \"token_us\": %.2f, \"auto_us\": %.2f, "
          "\"auto\": \"%s\", \"token_speedup\": %.2f, \"MB\": %.1f, \"token_GB_s\": %.0f, \"head_GB_s\": %.0f}\n",
          m.name, (long long)T, head, token, autok, auto_token ? "token" : "head", head / token, bytes / 1e6,
          bytes / token / 1e3, bytes / head / 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}
