// The CPU backend's mixture-of-experts ops, written plainly as the oracle of the CUDA kernels
// (backends/cuda/moe_*.cu) and of the Hugging Face fixtures: the router's softmax and top-k per
// token, then expert by expert the tokens routed to it gathered into one matrix, run through the
// backend's own linear (so FP32 weights go through sgemm with CpuPrecision::Exact and BF16 ones
// through the fast kernels otherwise) and SwiGLU, and added into each token's row with its
// routing weight. Experts nobody chose are never read.
#include <cmath>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void CpuBackend::moe_topk(const Tensor& logits, int64_t top_k, bool renormalize, Tensor& weights, Tensor& ids) {
  check_moe_topk(logits, top_k, weights, ids);
  const int64_t T = logits.size(0), E = logits.size(1);
  std::vector<float> scratch;
  const float* l = weights_f32(logits, scratch);  // (F32 activations on CPU: no copy)
  for (int64_t t = 0; t < T; ++t) {
    const float* row = l + t * E;
    float mx = row[0];
    for (int64_t e = 1; e < E; ++e) mx = std::max(mx, row[e]);
    std::vector<float> p(static_cast<size_t>(E));
    float sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(row[e] - mx);
    for (float& v : p) v /= sum;
    std::vector<bool> taken(static_cast<size_t>(E), false);
    float* w = weights.data<float>() + t * top_k;
    int32_t* id = ids.data<int32_t>() + t * top_k;
    float chosen = 0;
    for (int64_t j = 0; j < top_k; ++j) {  // the largest not yet taken; ties: the lower index
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (!taken[size_t(e)] && (best < 0 || p[size_t(e)] > p[size_t(best)])) best = e;
      taken[size_t(best)] = true;
      w[j] = p[size_t(best)];
      id[j] = int32_t(best);
      chosen += w[j];
    }
    if (renormalize)
      for (int64_t j = 0; j < top_k; ++j) w[j] /= chosen;
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights,
                             const Tensor& ids, Tensor& out) {
  check_moe_experts(x, w13, w2, weights, ids, out);
  const int64_t T = x.size(0), H = x.size(1), E = w13.size(0), I = w13.size(1) / 2, K = ids.size(1);
  const int32_t* id = ids.data<int32_t>();
  const float* rw = weights.data<float>();
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(E));  // expert -> the (t * K + j) that chose it
  for (int64_t i = 0; i < T * K; ++i) {
    if (id[i] < 0 || id[i] >= E) throw Error("moe_experts: expert id " + std::to_string(id[i]) + " out of range");
    routed[size_t(id[i])].push_back(i);
  }
  std::fill(out.data<float>(), out.data<float>() + T * H, 0.0f);
  const Tensor gate_up_all = w13.view({E * 2 * I, H}), down_all = w2.view({E * H, I});
  for (int64_t e = 0; e < E; ++e) {
    const auto& r = routed[size_t(e)];
    const int64_t n = int64_t(r.size());
    if (n == 0) continue;
    Tensor xe = empty({n, H}, DType::F32);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x.data<float>() + (r[size_t(i)] / K) * H, H, xe.data<float>() + i * H);
    Tensor gate_up = empty({n, 2 * I}, DType::F32), act = empty({n, I}, DType::F32), y = empty({n, H}, DType::F32);
    linear(xe, gate_up_all.rows(e * 2 * I, (e + 1) * 2 * I), gate_up);
    silu_and_mul(gate_up, act);
    linear(act, down_all.rows(e * H, (e + 1) * H), y);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = r[size_t(i)] / K;
      const float wt = rw[r[size_t(i)]];
      float* o = out.data<float>() + t * H;
      const float* yi = y.data<float>() + i * H;
      for (int64_t h = 0; h < H; ++h) o[h] += wt * yi[h];
    }
  }
}

}  // namespace nanovllm
