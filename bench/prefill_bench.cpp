// Prefill kernel benchmark (a program, not a test).
// Attention: one causal prefill of N fresh tokens (or B prompts of N tokens each: "BxN") through
// CudaBackend::attention, each prefill kernel forced in turn by its prefill_attention value
// (wgmma_tma, also with one CTA a work item instead of its persistent grid: wgmma_tma_one_cta_an_item;
// wgmma, mma with 32 and 16 rows per warp: backends/cuda/attention_prefill_<value>.cu; tiled:
// attention_tiled.cu), at the head shapes of Qwen3-0.6B (16/8 heads) and Qwen3-8B (32/8), D = 128,
// block size 256. Prints one JSON line per (shape, B, N, kernel) with the median time of the runs
// and the achieved TFLOP/s, counting the causal work B * 4 * D * Hq * N (N + 1) / 2 (QK^T and PV,
// multiply-adds as 2 FLOPs).
//
// GEMMs: CudaBackend::linear (cuBLASLt, the algorithm its heuristic picks) at the prefill shapes of
// both models' layers (qkv, o, gate_up, down) for M = 4,096 and 16,384 tokens, in TFLOP/s
// (2 M N K / time); scripts/ttft_transformers.py --kernels-only times torch.matmul on the same.
// The same shapes with FP8 weights (sm_89+; "operands"): per-channel (--quantization fp8: the
// activations quantized per token, then cuBLASLt's FP8 GEMM), 128 x 128 blocks as in Qwen's FP8
// checkpoints (the activations quantized per token and 128 columns, cuBLASLt's VEC128 FP8 GEMM),
// and the same blocks with fp8_gemm=dequantize (weight-only: BF16 weight, then the BF16 GEMM); each
// call inside a step, as the engine runs it (its temporaries from the step arena).
//
// Usage: prefill_bench [N | BxN ...]   (default 1024 8192 32000); NANOVLLM_BENCH_TILED=0 skips the
// CUDA-core kernel (seconds per call at 32K); NANOVLLM_BENCH_KERNELS=wgmma_tma,wgmma times only those.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/backends/attention_metadata.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "qwen3_linear_shapes.h"

using namespace nanovllm;

namespace {

struct Shape3 {
  const char* model;
  int64_t hq, hkv, d;
};

// Median seconds of `runs` calls of op (each synchronized), after one warm-up call.
double median_seconds(CudaBackend& be, int runs, const std::function<void()>& op) {
  op();
  be.synchronize();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    be.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void bench_gemms(CudaBackend& be, CudaBackend& dequantize) {
  using Gemm = bench::LinearShape;
  const auto& gemms = bench::kQwen3LinearShapes;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t m : {4096, 16384})
    for (const Gemm& g : gemms) {
      std::vector<float> host(size_t(std::max(m, g.n) * g.k));
      for (auto& x : host) x = u(rng);
      Tensor x = be.empty({m, g.k}, DType::BF16), w = be.empty({g.n, g.k}, DType::BF16),
             out = be.empty({m, g.n}, DType::BF16);
      be.upload(host.data(), DType::F32, x);
      be.upload(host.data(), DType::F32, w);
      auto report = [&](const char* operands, double sec) {
        std::printf(
            "{\"bench\": \"prefill_gemm\", \"model\": \"%s\", \"layer\": \"%s\", \"operands\": \"%s\", \"m\": "
            "%lld, \"n\": %lld, \"k\": %lld, \"ms\": %.3f, \"tflops\": %.1f}\n",
            g.model, g.layer, operands, (long long)m, (long long)g.n, (long long)g.k, sec * 1e3,
            2.0 * double(m) * double(g.n) * double(g.k) / sec / 1e12);
        std::fflush(stdout);
      };
      report("bf16", median_seconds(be, 20, [&] { be.linear(x, w, out); }));
      if (!be.supports_quantization(Quantization::FP8)) continue;
      Tensor codes;
      WeightScales channel;
      be.quantize_weight(w, Quantization::FP8, codes, channel);
      const int64_t bn = (g.n + 127) / 128, bk = (g.k + 127) / 128;
      std::vector<float> block_host(size_t(bn * bk), 1.0f / 448.0f);
      WeightScales block{be.empty({bn, bk}, DType::F32), 128, 128};
      be.upload(block_host.data(), DType::F32, block.scale);
      auto in_step = [](CudaBackend& b, const std::function<void()>& op) {
        return [&b, op] {
          b.begin_step();
          op();
        };
      };
      Backend& fp8 = be;  // linear(x, codes, scales, out) is the Backend interface's
      Backend& weight_only = dequantize;
      report("fp8_channel", median_seconds(be, 20, in_step(be, [&] { fp8.linear(x, codes, channel, out); })));
      report("fp8_block128", median_seconds(be, 20, in_step(be, [&] { fp8.linear(x, codes, block, out); })));
      report("fp8_block128_dequantize", median_seconds(dequantize, 20, in_step(dequantize, [&] {
                                                         weight_only.linear(x, codes, block, out);
                                                       })));
    }
}

}  // namespace

int main(int argc, char** argv) {
  struct Batch {
    int64_t seqs, len;
  };
  std::vector<Batch> lens;  // "N" or "BxN"
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t x = a.find('x');
    lens.push_back(x == std::string::npos ? Batch{1, std::atoll(a.c_str())}
                                          : Batch{std::atoll(a.substr(0, x).c_str()), std::atoll(a.c_str() + x + 1)});
  }
  if (lens.empty()) lens = {{1, 1024}, {1, 8192}, {1, 32000}};
  const char* tiled_env = std::getenv("NANOVLLM_BENCH_TILED");
  const bool tiled = !(tiled_env && std::string(tiled_env) == "0");
  const char* only = std::getenv("NANOVLLM_BENCH_KERNELS");  // e.g. "wgmma_tma,wgmma": only these
  const Shape3 shapes[] = {{"qwen3-0.6b", 16, 8, 128}, {"qwen3-8b", 32, 8, 128}};
  const int64_t bs = 256;
  CudaBackend be(0);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (const auto& s : shapes)
    for (const Batch& batch : lens) {
      const int64_t B = batch.seqs, len = batch.len, n = B * len;
      const int64_t nb_seq = (len + bs - 1) / bs, nb = B * nb_seq, W = (s.hq + 2 * s.hkv) * s.d;
      std::vector<float> host(size_t(std::max(n * W, nb * bs * s.hkv * s.d) + 8));
      for (auto& x : host) x = u(rng);
      Tensor qkv = be.empty({n, W}, DType::BF16), k = be.empty({nb, bs, s.hkv, s.d}, DType::BF16),
             v = be.empty({nb, bs, s.hkv, s.d}, DType::BF16), out = be.empty({n, s.hq * s.d}, DType::BF16);
      be.upload(host.data(), DType::F32, qkv);
      be.upload(host.data(), DType::F32, k);
      be.upload(host.data() + 7, DType::F32, v);
      AttentionMetadata md;
      md.is_prefill = true;
      md.num_seqs = B;
      md.num_tokens = n;
      md.max_blocks = nb_seq;
      for (int64_t b = 0; b <= B; ++b) {
        md.cu_seqlens_q.push_back(int32_t(b * len));
        md.cu_seqlens_k.push_back(int32_t(b * len));
      }
      md.max_seqlen_q = md.max_seqlen_k = int32_t(len);
      md.context_lens.assign(size_t(B), int32_t(len));
      md.block_tables.resize(size_t(nb));  // [B][nb_seq]
      std::iota(md.block_tables.begin(), md.block_tables.end(), 0);
      std::shuffle(md.block_tables.begin(), md.block_tables.end(), rng);
      for (int64_t i = 0; i < n; ++i)
        md.slot_mapping.push_back(int32_t(md.block_tables[size_t(i / len * nb_seq + i % len / bs)] * bs + i % bs));
      be.prepare_metadata(md);
      const float scale = 1.f / std::sqrt(float(s.d));
      const double flops = double(B) * 4.0 * double(s.d) * double(s.hq) * double(len) * double(len + 1) / 2.0;
      struct Variant {
        const char* name;
        PrefillAttention kernel;
        int rows_per_warp;
        bool persistent;
      };
      const Variant variants[] = {{"wgmma_tma", PrefillAttention::WgmmaTma, 32, true},
                                  {"wgmma_tma_one_cta_an_item", PrefillAttention::WgmmaTma, 32, false},
                                  {"wgmma", PrefillAttention::Wgmma, 32, true},
                                  {"mma_32", PrefillAttention::Mma, 32, true},
                                  {"mma_16", PrefillAttention::Mma, 16, true},
                                  {"tiled", PrefillAttention::Tiled, 32, true}};
      for (const Variant& var : variants) {
        if (var.kernel == PrefillAttention::Tiled && !tiled) continue;
        if (only && ("," + std::string(only) + ",").find("," + std::string(var.name) + ",") == std::string::npos)
          continue;
        be.set_prefill_attention(var.kernel);
        be.set_prefill_rows_per_warp(var.rows_per_warp);
        be.set_prefill_attention_persistent(var.persistent);
        const int runs = var.kernel == PrefillAttention::Tiled ? 1 : (n <= 8192 ? 20 : 5);
        double sec = 0;
        try {
          sec = median_seconds(be, runs, [&] { be.attention(qkv, k, v, out, s.hq, s.hkv, s.d, scale, md); });
        } catch (const std::exception& e) {
          std::printf("{\"bench\": \"prefill_attention\", \"kernel\": \"%s\", \"error\": \"%s\"}\n", var.name,
                      e.what());
          continue;
        }
        std::printf(
            "{\"bench\": \"prefill_attention\", \"model\": \"%s\", \"hq\": %lld, \"hkv\": %lld, \"d\": %lld, "
            "\"prompts\": %lld, \"tokens\": %lld, \"kernel\": \"%s\", \"ms\": %.3f, \"tflops\": %.1f}\n",
            s.model, (long long)s.hq, (long long)s.hkv, (long long)s.d, (long long)B, (long long)len, var.name,
            sec * 1e3, flops / sec / 1e12);
        std::fflush(stdout);
      }
      be.set_prefill_attention(PrefillAttention::Auto);
      be.set_prefill_rows_per_warp(32);
      be.set_prefill_attention_persistent(true);
    }
  KernelOptions weight_only;
  weight_only.fp8_gemm = Fp8Gemm::Dequantize;
  CudaBackend dequantize(0, weight_only);
  bench_gemms(be, dequantize);
  return 0;
}
