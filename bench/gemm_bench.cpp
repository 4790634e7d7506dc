// Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) against cuBLASLt (CudaBackend::linear: the
// algorithm its heuristic picks), a program, not a test. At the linear layers of Qwen3-0.6B and
// Qwen3-8B (qkv, o, gate_up, down) for M rows of x: each GEMM runs as a CUDA graph of `reps`
// back-to-back calls (as a forward replays them), timed over a few replays after a warm-up one.
// Prints one JSON line per (model, layer, M): microseconds a call and TFLOP/s (2 M N K / time) of
// cuBLASLt and of each tile form, and each form's largest difference from cuBLASLt's output
// relative to its largest magnitude; for gate_up also cuBLASLt + silu_and_mul against the fused
// GateUpSilu form (us, and how many outputs differ).
//
// Usage: gemm_bench [M ...]   (default 256 1024 4096 16384)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "qwen3_linear_shapes.h"

using namespace nanovllm;

namespace {

// Microseconds a call of `op`, captured `reps` times into one graph on the backend's stream
// (CudaBackend::graph_capture_begin), each replay timed by events on that stream: the median of 5.
double us_per_call(CudaBackend& be, int reps, const std::function<void()>& op) {
  auto st = static_cast<cudaStream_t>(be.stream());
  op();  // outside the capture: any lazy set-up (cuBLASLt plans, function attributes)
  be.synchronize();
  be.graph_capture_begin();
  for (int i = 0; i < reps; ++i) op();
  const int64_t graph = be.graph_capture_end();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  be.graph_replay(graph);  // warm-up
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(a, st);
    be.graph_replay(graph);
    cudaEventRecord(b, st);
    cudaEventSynchronize(b);
    float m = 0;
    cudaEventElapsedTime(&m, a, b);
    ms.push_back(m);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  be.graph_destroy(graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3 / reps;
}

std::vector<float> to_f32(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> Ms;
  for (int i = 1; i < argc; ++i) Ms.push_back(std::atoll(argv[i]));
  if (Ms.empty()) Ms = {256, 1024, 4096, 16384};
  CudaBackend be(0);
  if (!be.wgmma()) {
    std::fprintf(stderr, "gemm_bench: no sm_90a code for this GPU\n");
    return 2;
  }
  using Gemm = bench::LinearShape;
  const auto& gemms = bench::kQwen3LinearShapes;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t m : Ms)
    for (const Gemm& g : gemms) {
      be.begin_step();
      std::vector<float> host(size_t(std::max(m, g.n) * g.k));
      for (auto& x : host) x = u(rng);
      Tensor x = be.empty({m, g.k}, DType::BF16), w = be.empty({g.n, g.k}, DType::BF16),
             ref = be.empty({m, g.n}, DType::BF16), out = be.empty({m, g.n}, DType::BF16);
      be.upload(host.data(), DType::F32, x);
      be.upload(host.data(), DType::F32, w);
      const int reps = std::max<int>(4, int(2e10 / double(2 * m * g.n * g.k)));  // ~ a few ms a replay
      const double flop = 2.0 * double(m) * double(g.n) * double(g.k);
      const double cublas_us = us_per_call(be, reps, [&] { be.linear(x, w, ref); });
      std::vector<uint16_t> want(size_t(m * g.n));
      be.download(ref, want.data());
      const std::vector<float> wf = to_f32(want);
      float peak = 0;
      for (float v : wf) peak = std::max(peak, std::abs(v));
      std::string forms;
      for (const cuda::GemmWgmmaForm form : cuda::kGemmWgmmaForms) {
        auto run = [&] {
          cuda::gemm_wgmma(x.raw(), w.raw(), out.raw(), m, g.n, g.k, form,
                           be.gemm_resident(cuda::gemm_wgmma_form_pairs(form)), be.stream());
        };
        const double us = us_per_call(be, reps, run);
        std::vector<uint16_t> got(size_t(m * g.n));
        be.download(out, got.data());
        float diff = 0;
        for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(bf16_to_f32(got[i]) - wf[i]));
        char buf[256];
        std::snprintf(buf, sizeof buf, ", \"%s_us\": %.2f, \"%s_tflops\": %.1f, \"%s_max_rel_diff\": %.1e",
                      cuda::gemm_wgmma_form_name(form), us, cuda::gemm_wgmma_form_name(form), flop / us / 1e6,
                      cuda::gemm_wgmma_form_name(form), diff / std::max(peak, 1e-30f));
        forms += buf;
      }
      if (std::string(g.layer) == "gate_up") {  // the gated MLP's first half, fused or not
        const int64_t I = g.n / 2;
        Tensor act = be.empty({m, I}, DType::BF16), fused = be.empty({m, I}, DType::BF16);
        const double unfused_us = us_per_call(be, reps, [&] {
          be.linear(x, w, ref);
          be.silu_and_mul(ref, act);
        });
        char buf[256];
        std::snprintf(buf, sizeof buf, ", \"cublaslt_silu_and_mul_us\": %.2f", unfused_us);
        forms += buf;
        std::vector<uint16_t> a(size_t(m * I)), f(size_t(m * I));
        be.download(act, a.data());
        for (const cuda::GemmWgmmaForm form :
             {cuda::GemmWgmmaForm::GateUpSilu, cuda::GemmWgmmaForm::GateUpSiluEpiWarps,
              cuda::GemmWgmmaForm::GateUpSiluEpiWarpsPair, cuda::GemmWgmmaForm::GateUpSiluPingPong,
              cuda::GemmWgmmaForm::GateUpSiluPingPongPair}) {
          const double fused_us = us_per_call(be, reps, [&] {
            cuda::gemm_wgmma(x.raw(), w.raw(), fused.raw(), m, I, g.k, form,
                             be.gemm_resident(cuda::gemm_wgmma_form_pairs(form)), be.stream());
          });
          be.download(fused, f.data());
          size_t differ = 0;
          for (size_t i = 0; i < a.size(); ++i) differ += a[i] != f[i];
          const char* name = cuda::gemm_wgmma_form_name(form);
          std::snprintf(buf, sizeof buf, ", \"%s_us\": %.2f, \"%s_differ\": %zu", name, fused_us, name, differ);
          forms += buf;
        }
      }
      std::printf(
          "{\"bench\": \"gemm\", \"model\": \"%s\", \"layer\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
          "\"cublaslt_us\": %.2f, \"cublaslt_tflops\": %.1f, \"pair_ctas\": %d%s}\n",
          g.model, g.layer, (long long)m, (long long)g.n, (long long)g.k, cublas_us, flop / cublas_us / 1e6,
          be.gemm_resident(true), forms.c_str());
      std::fflush(stdout);
    }
  return 0;
}
