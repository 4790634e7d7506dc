// CPU INT4 decode micro-benchmark (a program, not a test): CpuBackend's linear (--cpu-precision fast)
// at batch 1 on Qwen3-0.6B's shapes, as a decode step issues them: 28 layers of U4 weights (4 bits,
// groups of 128, zero points; cpu_int4_kernels.h) for qkv (4096 x 1024), o (1024 x 2048), gate_up
// (6144 x 1024) and down (1024 x 3072), each layer its own weights (so nothing stays in cache from
// one step to the next), then the BF16 LM head (151,936 x 1,024). Prints one JSON line per shape:
// microseconds per call (the mean over `steps` steps after a warm-up one), the bytes one call
// reads (codes + the F32 scale and U8 zero point per group; the head's BF16 rows) and the GB/s it makes.
//
// Usage: cpu_int4_bench [threads] [steps]   (default 2 20)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/int_weights.h"
#include "nanovllm/utils/dtype.h"

using namespace nanovllm;

namespace {

struct Shape2 {
  const char* name;
  int64_t N, K;
};

struct Layer {
  Tensor codes;
  WeightScales s;
};

Layer make_layer(Backend& be, int64_t N, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.02f);
  Tensor w = Tensor::host({N, K}, DType::F32);
  for (int64_t i = 0; i < N * K; ++i) w.data<float>()[i] = nd(rng);
  Layer l;
  int_quantize_weight(w, 4, 128, true, l.codes, l.s);
  be.prepare_int_weight(l.codes, l.s);  // as the loaders do
  return l;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  constexpr int kLayers = 28;
  const Shape2 shapes[] = {{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}};
  CpuBackend be(threads, CpuPrecision::Fast);
  std::mt19937 rng(1);
  std::vector<std::vector<Layer>> layers(kLayers);
  for (auto& l : layers)
    for (const auto& s : shapes) l.push_back(make_layer(be, s.N, s.K, rng));
  const int64_t V = 151936, H = 1024;
  Tensor head = Tensor::host({V, H}, DType::BF16);
  for (int64_t i = 0; i < V * H; ++i)
    head.data<uint16_t>()[i] = f32_to_bf16(0.02f * float(int(rng() % 200) - 100) / 100);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<Tensor> x, out;
  for (const auto& s : shapes) {
    x.push_back(Tensor::host({1, s.K}, DType::F32));
    for (int64_t k = 0; k < s.K; ++k) x.back().data<float>()[k] = nd(rng);
    out.push_back(Tensor::host({1, s.N}, DType::F32));
  }
  Tensor hx = Tensor::host({1, H}, DType::F32), logits = Tensor::host({1, V}, DType::F32);
  for (int64_t k = 0; k < H; ++k) hx.data<float>()[k] = nd(rng);
  Backend& b = be;
  std::vector<double> sec(std::size(shapes) + 1, 0.0);
  for (int step = 0; step <= steps; ++step) {
    for (int l = 0; l < kLayers; ++l)
      for (size_t i = 0; i < std::size(shapes); ++i) {
        const double t0 = now();
        b.linear(x[i], layers[size_t(l)][i].codes, layers[size_t(l)][i].s, out[i]);
        if (step > 0) sec[i] += now() - t0;
      }
    const double t0 = now();
    b.linear(hx, head, logits);
    if (step > 0) sec.back() += now() - t0;
  }
  double total = 0;
  for (size_t i = 0; i <= std::size(shapes); ++i) {
    const bool is_head = i == std::size(shapes);
    const int64_t N = is_head ? V : shapes[i].N, K = is_head ? H : shapes[i].K;
    // codes, F32 scale and U8 zero point per group of 128; the head's BF16 rows
    const double bytes = is_head ? double(N * K * 2) : double(N * K / 2 + N * (K / 128) * 5);
    const double us = sec[i] / steps / (is_head ? 1 : kLayers) * 1e6;
    total += sec[i] / steps;
    std::printf("{\"op\":\"%s\",\"N\":%lld,\"K\":%lld,\"us\":%.1f,\"bytes\":%.0f,\"GB_s\":%.1f}\n",
                is_head ? "lm_head" : shapes[i].name, (long long)N, (long long)K, us, bytes, bytes / us * 1e-3);
  }
  std::printf("{\"op\":\"step\",\"ms\":%.2f,\"threads\":%d}\n", total * 1e3, threads);
  return 0;
}
