// INT4 linear micro-benchmark (a program, not a test): CudaBackend's linear with group-quantized U4
// weights (AWQ-style: 4 bits, groups of 128, zero points; int_linear.cu) against the BF16 linear of
// the same shape, at Qwen3-8B's layer shapes (qkv, o, gate_up with the fused SiLU, down) for T rows
// of x: the decode GEMV (T <= 32) under each KernelOptions::int_gemv value (v1: passes of 8 rows;
// v2: int_gemv_v2.cu, one pass; v3: int_gemv_v3.cu, fewer instructions per tile, K split over a
// cluster where kernel_plan.h's int_gemv_v3_splits says; v4: int_gemv_v4.cu, v3's outputs from a
// persistent grid; v5: int_gemv_v5.cu, v4 with its rings in shared memory and twice the warps; auto: the
// default, per layer the one kernel_plan.h picks), and the
// dequantize + cuBLASLt path beyond.
// Prints one JSON line per (layer, T): microseconds per call of v1, v2, v3 and v4 (the mean of `reps`
// back-to-back calls inside one step, as the engine issues them), the weight bytes one call reads
// (codes + the 4-byte scale/zero pair per row and group) and the GB/s each makes, and the BF16
// linear's time. The GEMV's target: its GB/s near the device's DRAM bandwidth at T = 1. Each
// variant runs on its own backend (the option is fixed at construction), on the same weights.
// T > 32: one JSON line of the tensor-core GEMMs (KernelOptions::int_gemm=mma: int_gemm.cu;
// wgmma: int_gemm_wgmma.cu; T <= 256, beyond both take the dequantize path), the dequantize +
// cuBLASLt path (int_gemm=dequantize) and the BF16 linear: microseconds and TFLOP/s (2 T N K) of
// each, the GEMMs' K splits, and the largest difference between each GEMM's and the dequantize
// path's outputs relative to the largest output (mma: exact weights against BF16 ones, ~1e-2 at
// most; wgmma: the same BF16 weights, F32 sums in another order; a wrong fragment would be O(1)).
// The Hopper GEMM also runs in its wide form (wgmma_wide: int_gemm=wgmma_wide, two column tiles a
// CTA past 64 rows) and in that form with the weights dequantized into shared memory by a third
// warpgroup (wgmma_ss: int_gemm=wgmma_ss, int_gemm_wgmma_ss.cu). The target: the GEMM at or
// above BF16 at T 64..256.
//
// Usage: int_linear_bench [T ...]   (default 1 2 4 8 16 32 64 128 256 2048)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "nanovllm/backends/cuda/cuda_backend.h"

using namespace nanovllm;

namespace {

// Mean seconds of one call of op over `reps` back-to-back calls in one step (after a warm-up step).
double seconds_per_call(CudaBackend& be, int reps, const std::function<void()>& op) {
  for (int pass = 0; pass < 2; ++pass) {
    be.begin_step();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < (pass ? reps : 2); ++i) op();
    be.synchronize();
    if (pass) return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  }
  return 0;
}

Tensor random_bf16(CudaBackend& be, const Shape& shape, uint32_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  for (auto& x : v) x = d(rng);
  Tensor t = be.empty(shape, DType::BF16);
  be.upload(v.data(), DType::F32, t);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(std::atoll(argv[i]));
  if (Ts.empty()) Ts = {1, 2, 4, 8, 16, 32, 64, 128, 256, 2048};
  KernelOptions o1, o2, o3, o4, o5, o6, o7, o8, o9;
  o1.int_gemv = IntGemv::V1;
  o2.int_gemv = IntGemv::V2;
  o3.int_gemm = IntGemm::Dequantize;
  o4.int_gemv = IntGemv::V3;
  o5.int_gemv = IntGemv::V4;
  o6.int_gemv = IntGemv::V5;
  o7.int_gemv = IntGemv::Auto;
  o8.int_gemm = IntGemm::Mma;
  o9.int_gemm = IntGemm::Wgmma;
  KernelOptions o10, o11;             // the Hopper GEMM's wide form past 64 rows (kernel_plan.h:
  o10.int_gemm = IntGemm::WgmmaSs;    // int_gemm_wgmma_wide), with the weights through shared memory
  o11.int_gemm = IntGemm::WgmmaWide;  // (int_gemm_wgmma_ss.cu) and in registers
  CudaBackend be(0, o1), be2(0, o2), be3(0, o3), be4(0, o4), be5(0, o5), be6(0, o6), be7(0, o7), be8(0, o8), be9(0, o9);
  CudaBackend be10(0, o10), be11(0, o11);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  struct Layer {
    const char* name;
    int64_t n, k;
    bool silu;
  };
  const Layer layers[] = {{"qkv", 6144, 4096, false},
                          {"o", 4096, 4096, false},
                          {"gate_up", 24576, 4096, true},
                          {"down", 4096, 12288, false}};
  for (const Layer& l : layers) {
    const Tensor w = random_bf16(be, {l.n, l.k}, 1), w2 = random_bf16(be2, {l.n, l.k}, 1);
    Tensor codes, codes2;
    WeightScales scales, scales2;
    be.quantize_weight(w, Quantization::AWQ, codes, scales);
    be2.quantize_weight(w2, Quantization::AWQ, codes2, scales2);
    const Tensor w4 = random_bf16(be4, {l.n, l.k}, 1);
    Tensor codes4;
    WeightScales scales4;
    be4.quantize_weight(w4, Quantization::AWQ, codes4, scales4);
    const Tensor w5 = random_bf16(be5, {l.n, l.k}, 1);
    Tensor codes5;
    WeightScales scales5;
    be5.quantize_weight(w5, Quantization::AWQ, codes5, scales5);
    const Tensor w6 = random_bf16(be6, {l.n, l.k}, 1);
    Tensor codes6;
    WeightScales scales6;
    be6.quantize_weight(w6, Quantization::AWQ, codes6, scales6);
    const Tensor w7 = random_bf16(be7, {l.n, l.k}, 1);
    Tensor codes7;
    WeightScales scales7;
    be7.quantize_weight(w7, Quantization::AWQ, codes7, scales7);
    const Tensor w3 = random_bf16(be3, {l.n, l.k}, 1);
    Tensor codes3;
    WeightScales scales3;
    be3.quantize_weight(w3, Quantization::AWQ, codes3, scales3);
    const Tensor w8 = random_bf16(be8, {l.n, l.k}, 1), w9 = random_bf16(be9, {l.n, l.k}, 1);
    Tensor codes8, codes9;
    WeightScales scales8, scales9;
    be8.quantize_weight(w8, Quantization::AWQ, codes8, scales8);
    be9.quantize_weight(w9, Quantization::AWQ, codes9, scales9);
    const Tensor w10 = random_bf16(be10, {l.n, l.k}, 1), w11 = random_bf16(be11, {l.n, l.k}, 1);
    Tensor codes10, codes11;
    WeightScales scales10, scales11;
    be10.quantize_weight(w10, Quantization::AWQ, codes10, scales10);
    be11.quantize_weight(w11, Quantization::AWQ, codes11, scales11);
    const double bytes = double(l.n) * double(l.k) / 2 + double(l.n) * double(l.k / 128) * 4;
    for (int64_t T : Ts) {
      const Tensor x = random_bf16(be, {T, l.k}, 2), x2 = random_bf16(be2, {T, l.k}, 2);
      const int64_t outs = l.silu ? l.n / 2 : l.n;
      const int reps = T <= 64 ? 200 : 20;
      // quantized: on `on`'s weights (the quantized overloads through Backend: CudaBackend's own hide them).
      auto run = [&](CudaBackend& on, const Tensor& xv, const Tensor& cv, const WeightScales& sv, bool quantized) {
        Backend& base = on;
        return seconds_per_call(on, reps, [&] {
          Tensor out = on.empty({T, outs}, DType::BF16);
          if (quantized && l.silu)
            base.linear_silu_mul(xv, cv, sv, out);
          else if (quantized)
            base.linear(xv, cv, sv, out);
          else if (l.silu)
            on.linear_silu_mul(xv, w, out);
          else
            on.linear(xv, w, out);
        });
      };
      // One call's outputs on the host.
      auto once = [&](CudaBackend& on, const Tensor& xv, const Tensor& cv, const WeightScales& sv) {
        Backend& base = on;
        Tensor out = on.empty({T, outs}, DType::BF16);
        if (l.silu)
          base.linear_silu_mul(xv, cv, sv, out);
        else
          base.linear(xv, cv, sv, out);
        return on.to_host_f32(out);
      };
      if (T > 32) {  // the mma.sync GEMM (be8), the Hopper GEMM (be9), dequantize + cuBLASLt (be3), BF16 (be)
        const Tensor x3 = random_bf16(be3, {T, l.k}, 2), x8 = random_bf16(be8, {T, l.k}, 2);
        const Tensor x9 = random_bf16(be9, {T, l.k}, 2), x10 = random_bf16(be10, {T, l.k}, 2);
        const Tensor x11 = random_bf16(be11, {T, l.k}, 2);
        const double qm = run(be8, x8, codes8, scales8, true), qw = run(be9, x9, codes9, scales9, true);
        const double qw2 = run(be10, x10, codes10, scales10, true), qw4 = run(be11, x11, codes11, scales11, true);
        const double qd = run(be3, x3, codes3, scales3, true), b = run(be, x, codes, scales, false);
        const std::vector<float> od = once(be3, x3, codes3, scales3), om = once(be8, x8, codes8, scales8);
        const std::vector<float> ow = once(be9, x9, codes9, scales9), ow2 = once(be10, x10, codes10, scales10);
        const std::vector<float> ow4 = once(be11, x11, codes11, scales11);
        double big = 0, diff_m = 0, diff_w = 0, diff_w2 = 0, diff_w4 = 0;
        for (size_t i = 0; i < od.size(); ++i) {
          big = std::max(big, double(std::fabs(od[i])));
          diff_m = std::max(diff_m, double(std::fabs(om[i] - od[i])));
          diff_w = std::max(diff_w, double(std::fabs(ow[i] - od[i])));
          diff_w2 = std::max(diff_w2, double(std::fabs(ow2[i] - od[i])));
          diff_w4 = std::max(diff_w4, double(std::fabs(ow4[i] - od[i])));
        }
        const double rel = big > 0 ? 1 / big : 1;
        const double flop = 2.0 * double(T) * double(l.n) * double(l.k);
        const int splits =
            cuda::int_gemm_splits(T, outs, l.silu && cuda::int_gemm_fuses_silu(outs), l.k, prop.multiProcessorCount);
        std::printf(
            "{\"layer\": \"%s\", \"n\": %lld, \"k\": %lld, \"T\": %lld, \"splits\": %d, \"mma_us\": %.2f, "
            "\"wgmma_us\": %.2f, \"dequant_us\": %.2f, \"bf16_us\": %.2f, \"mma_TFLOP_s\": %.1f, "
            "\"wgmma_TFLOP_s\": %.1f, \"dequant_TFLOP_s\": %.1f, \"bf16_TFLOP_s\": %.1f, \"wgmma_over_bf16\": %.2f, "
            "\"mma_dequant_max_rel_diff\": %.2e, \"wgmma_dequant_max_rel_diff\": %.2e, \"wgmma_ss_us\": %.2f, "
            "\"wgmma_wide_us\": %.2f, \"wgmma_ss_dequant_max_rel_diff\": %.2e, \"wgmma_wide_dequant_max_rel_diff\": "
            "%.2e}\n",
            l.name, (long long)l.n, (long long)l.k, (long long)T, splits, qm * 1e6, qw * 1e6, qd * 1e6, b * 1e6,
            flop / qm / 1e12, flop / qw / 1e12, flop / qd / 1e12, flop / b / 1e12, b / qw, diff_m * rel, diff_w * rel,
            qw2 * 1e6, qw4 * 1e6, diff_w2 * rel, diff_w4 * rel);
        std::fflush(stdout);
        continue;
      }
      const Tensor x4 = random_bf16(be4, {T, l.k}, 2), x5 = random_bf16(be5, {T, l.k}, 2);
      const Tensor x6 = random_bf16(be6, {T, l.k}, 2), x7 = random_bf16(be7, {T, l.k}, 2);
      const double q1 = run(be, x, codes, scales, true), q2 = run(be2, x2, codes2, scales2, true);
      const double q3 = run(be4, x4, codes4, scales4, true), q4 = run(be5, x5, codes5, scales5, true);
      const double q5 = run(be6, x6, codes6, scales6, true), q6 = run(be7, x7, codes7, scales7, true);
      const double b = run(be, x, codes, scales, false);
      // v2 against v1 on the same codes and x (same seeds): the largest difference relative to v1's largest
      // output (both BF16 outputs of F32 sums: a few BF16 ulps; a wrong fragment would be O(1)).
      // v3 against v2 likewise (v3 takes U4's zero out through sums of x: the same F32 sums up to their
      // rounding, so BF16 outputs one ulp apart at most, ~4e-3 of the largest; a wrong fragment: O(1)).
      const std::vector<float> o1 = once(be, x, codes, scales), o2 = once(be2, x2, codes2, scales2);
      // v4 against v3: the same arithmetic (v3 unsplit at these shapes), so 0 (bit for bit).
      const std::vector<float> o3 = once(be4, x4, codes4, scales4), o4 = once(be5, x5, codes5, scales5);
      // v5 against v3: other F32 summation orders at 16 warps a CTA, so BF16 outputs a rounding flip apart.
      const std::vector<float> o5 = once(be6, x6, codes6, scales6);
      double big = 0, diff = 0, diff3 = 0, diff4 = 0, diff5 = 0;
      for (size_t i = 0; i < o1.size(); ++i) {
        big = std::max(big, double(std::fabs(o1[i]))), diff = std::max(diff, double(std::fabs(o1[i] - o2[i])));
        diff3 = std::max(diff3, double(std::fabs(o3[i] - o2[i])));
        diff4 = std::max(diff4, double(std::fabs(o4[i] - o3[i])));
        diff5 = std::max(diff5, double(std::fabs(o5[i] - o3[i])));
      }
      const int splits =
          cuda::int_gemv_v3_splits(T, outs, l.silu, l.k, 128, 4, prop.multiProcessorCount, prop.major >= 9);
      std::printf(
          "{\"layer\": \"%s\", \"n\": %lld, \"k\": %lld, \"T\": %lld, \"int4_weight_bytes\": %.0f, "
          "\"v1_us\": %.2f, \"v1_GB_s\": %.1f, \"v2_us\": %.2f, \"v2_GB_s\": %.1f, \"bf16_us\": %.2f, "
          "\"bf16_GB_s\": %.1f, \"v1_speedup\": %.2f, \"v2_speedup\": %.2f, \"v2_over_v1\": %.2f, "
          "\"v2_v1_max_rel_diff\": %.2e, \"v3_us\": %.2f, \"v3_GB_s\": %.1f, \"v3_speedup\": %.2f, "
          "\"v3_over_v2\": %.2f, \"v3_splits\": %d, \"v3_v2_max_rel_diff\": %.2e, \"v4_us\": %.2f, "
          "\"v4_GB_s\": %.1f, \"v4_speedup\": %.2f, \"v4_over_v3\": %.2f, \"v4_grid\": %lld, "
          "\"v4_v3_max_rel_diff\": %.2e, \"v5_us\": %.2f, \"v5_GB_s\": %.1f, \"v5_over_v4\": %.2f, "
          "\"v5_v3_max_rel_diff\": %.2e, \"auto_us\": %.2f, \"auto_GB_s\": %.1f, \"auto_speedup\": %.2f}\n",
          l.name, (long long)l.n, (long long)l.k, (long long)T, bytes, q1 * 1e6, bytes / q1 / 1e9, q2 * 1e6,
          bytes / q2 / 1e9, b * 1e6, double(l.n) * double(l.k) * 2 / b / 1e9, b / q1, b / q2, q1 / q2,
          big > 0 ? diff / big : diff, q3 * 1e6, bytes / q3 / 1e9, b / q3, q2 / q3, splits,
          big > 0 ? diff3 / big : diff3, q4 * 1e6, bytes / q4 / 1e9, b / q4, q3 / q4,
          (long long)cuda::int_gemv_v4_grid(l.silu ? outs / 16 : (outs + 15) / 16, prop.multiProcessorCount),
          big > 0 ? diff4 / big : diff4, q5 * 1e6, bytes / q5 / 1e9, q4 / q5, big > 0 ? diff5 / big : diff5, q6 * 1e6,
          bytes / q6 / 1e9, b / q6);
      std::fflush(stdout);
    }
  }
  return 0;
}
