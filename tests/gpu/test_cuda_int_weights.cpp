// Group-quantized U4/U8 weights on CUDA (backends/cuda/int_prepare.cu, int_linear.cu; semantics in
// backends/int_weights.h): the linear against a double reference computed here from the canonical
// layout (int_dequantize_row) at awkward shapes (T 1..300: the GEMVs, the tensor-core GEMM and the
// dequantize + GEMM path; N not a multiple of the 16-row block, K not a multiple of the 64-column
// tile, groups of 16..K columns, U4 and U8, zero points and symmetric, act order), the gated-MLP
// fusion, F32 partial sums, dummy quantization against int_quantize_weight, refusals, a CUDA graph
// of a decode-sized product, and the engine with --quantization awq on CUDA against the CPU. The
// linear, fusion and graph tests run every GEMV (KernelOptions::int_gemv v1: passes of 8 rows; v2:
// int_gemv_v2.cu, one pass of 1, 2 or 4 n-tiles; v3: int_gemv_v3.cu, K split over a cluster where
// the plan says, forced by the shapes of V3SplitsKAcrossAClusterAgainstTheReference; v4:
// int_gemv_v4.cu, persistent, held to v3 bit for bit by V4EqualsV3BitForBit); T 33..256 the
// tensor-core GEMM (int_gemm.cu: its own sweep of shapes, splits of K and the fused gated MLP).
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include <cuda_runtime.h>

#include "engine_compare.h"
#include "gpu_test_util.h"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/int_weights.h"
#include "test_paths.h"

using namespace nanovllm;

namespace {

const IntGemv kGemvs[] = {IntGemv::V1, IntGemv::V2, IntGemv::V3, IntGemv::V4, IntGemv::V5, IntGemv::Auto};

KernelOptions with_gemv(IntGemv v) {
  KernelOptions o;
  o.int_gemv = v;
  return o;
}
std::string kernel_name(cuda::IntLinearKernel k) {
  switch (k) {
    case cuda::IntLinearKernel::Gemv: return "gemv";
    case cuda::IntLinearKernel::Gemm: return "gemm";
    case cuda::IntLinearKernel::GemmWgmma: return "gemm wgmma";
    case cuda::IntLinearKernel::DequantizeGemm: break;
  }
  return "dequantize";
}

struct IntWeightRef {
  const Tensor& codes;
  const WeightScales& scales;
};

// A canonical weight on the host (codes, F32 scale and zero, perm) and its prepared copy on the GPU.
struct IntWeight {
  Tensor codes;  // host, canonical
  WeightScales scales;
  Tensor gcodes;  // GPU, prepared
  WeightScales gscales;
};

// The quantized forms through Backend (CudaBackend's own overloads hide them).
void qlinear(Backend& be, const Tensor& x, const IntWeightRef& w, Tensor& out) { be.linear(x, w.codes, w.scales, out); }
void qsilu(Backend& be, const Tensor& x, const IntWeightRef& w, Tensor& out) {
  be.linear_silu_mul(x, w.codes, w.scales, out);
}

Tensor to_gpu(CudaBackend& gpu, const Tensor& host) {
  if (!host.defined()) return host;
  Tensor t = gpu.empty(host.shape(), host.dtype());
  gpu.upload(host.raw(), host.dtype(), t);
  return t;
}

// w's host codes and scales uploaded to `gpu` and prepared (gcodes, gscales).
void upload_weight(CudaBackend& gpu, IntWeight& w) {
  w.gcodes = to_gpu(gpu, w.codes);
  w.gscales = w.scales;
  w.gscales.scale = to_gpu(gpu, w.scales.scale);
  w.gscales.zero = to_gpu(gpu, w.scales.zero);
  w.gscales.perm = to_gpu(gpu, w.scales.perm);
  gpu.prepare_int_weight(w.gcodes, w.gscales);
  EXPECT_TRUE(CudaBackend::int_weight_prepared(w.gcodes, w.gscales));
  EXPECT_EQ(w.gcodes.shape(), w.codes.shape());
}

// Random weights [N, K] quantized by the host reference in groups of G (bits 4 or 8), with a random
// act-order permutation when `perm`; uploaded and prepared.
IntWeight make_weight(CudaBackend& gpu, int bits, int64_t N, int64_t K, int64_t G, bool zero, bool perm,
                      uint32_t seed) {
  IntWeight w;
  Tensor f = Tensor::host({N, K}, DType::F32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  for (int64_t i = 0; i < N * K; ++i) f.data<float>()[i] = d(rng) + (zero ? 0.01f : 0.f);
  int_quantize_weight(f, bits, G, zero, w.codes, w.scales);
  if (perm) {
    w.scales.perm = Tensor::host({K}, DType::I32);
    int32_t* p = w.scales.perm.data<int32_t>();
    std::iota(p, p + K, 0);
    std::shuffle(p, p + K, rng);
  }
  upload_weight(gpu, w);
  return w;
}

// out[t][n] = sum_k x[t][perm[k]] value[n][k], in double. With bf16_weights, value as the Hopper
// GEMM (int_gemm_wgmma.cuh: u4_weights) and the dequantize path (int_linear.cu) hold it: (q - z)
// times the scale's F16 copy, rounded once to BF16.
std::vector<double> reference(const IntWeight& w, const std::vector<float>& x, int64_t T, bool bf16_weights = false) {
  const int64_t N = w.codes.size(0), K = w.codes.size(1);
  const int32_t* p = w.scales.perm.defined() ? w.scales.perm.data<int32_t>() : nullptr;
  WeightScales unit = w.scales;  // scale 1: int_dequantize_row gives q - z
  if (bf16_weights) {
    unit.scale = Tensor::host(w.scales.scale.shape(), DType::F32);
    std::fill_n(unit.scale.data<float>(), unit.scale.numel(), 1.f);
  }
  const int64_t NG = w.scales.scale.size(1);
  std::vector<float> row(size_t(K), 0.f);
  std::vector<double> out(size_t(T * N), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    int_dequantize_row(w.codes, bf16_weights ? unit : w.scales, n, 0, K, row.data());
    if (bf16_weights)
      for (int64_t k = 0; k < K; ++k) {
        const float s16 = float(_Float16(w.scales.scale.data<float>()[n * NG + k * NG / K]));
        row[size_t(k)] = test::bf16_round(row[size_t(k)] * s16);
      }
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(t * K + (p ? p[k] : k))]) * row[size_t(k)];
      out[size_t(t * N + n)] = s;
    }
  }
  return out;
}

// got within tolerance of want: |got - want| <= rel * |want| + abs_tol for every element, where
// abs_tol = floor * rms(want) (an output near zero carries the absolute error of its terms).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel, double floor,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double ss = 0;
  for (double v : want) ss += v * v;
  const double rms = std::sqrt(ss / double(std::max<size_t>(want.size(), 1)));
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]), tol = rel * std::abs(want[i]) + floor * rms;
    if (!(err <= tol)) ++bad;
    worst = std::max(worst, err / (rms > 0 ? rms : 1));
  }
  EXPECT_EQ(bad, 0u) << what << ": worst error " << worst << " x rms " << rms;
}

struct Shape3 {
  int bits;
  int64_t N, K, G;
};

// The linear at T rows (BF16 or F32 out) against the reference.
// Tolerance: the GEMV and the mma.sync GEMM multiply x by the exact integers q - z in F32 and scale
// each group's sum in F32 by an F16 copy of the scale (2^-11 relative). Against the exact weights:
// 2^-8 of the value plus 2^-7 of the outputs' rms for a BF16 output (it rounds once more, 2^-9 of
// the value); F32 outputs: 2^-10 of the value and 2^-9 of the rms (each of the K / G groups' partial
// sums carries its scale's F16 rounding, up to 2^-12 relative: the worst of ~10^5 outputs reached
// 1.07e-3 x rms, U8 T 12 K 2048 on an H200; a wrong fragment is off by O(1)). The Hopper GEMM and
// the dequantize path round each weight to BF16 before F32-accumulating products: against the same
// rounded weights (reference(..., true)), only the output's rounding and the sums' order remain:
// 2^-8 (BF16 out) or 2^-10 (F32) of the value plus 2^-9 of the rms (F32 sums of K = 4096 terms on
// tensor cores). Against the exact weights their rounding errors (~2.4e-3 x rms at K 4096
// symmetric) left a near-zero output 3.7 sigma off (N 1000 K 4096 T 200 sym perm: bit-identical on
// all three Hopper forms and in a host emulation of their arithmetic).
void check_linear(test::Backends& b, const Shape3& s, int64_t T, bool zero, bool perm, bool f32_out) {
  const IntWeight w = make_weight(b.gpu, s.bits, s.N, s.K, s.G, zero, perm, uint32_t(s.N * 7 + s.K + T));
  const std::vector<float> x = test::rand_bf16(size_t(T * s.K), uint32_t(T + s.K), -1.f, 1.f);
  Tensor gx = b.gpu.empty({T, s.K}, DType::BF16);
  b.gpu.upload(x.data(), DType::F32, gx);
  Tensor out = b.gpu.empty({T, s.N}, f32_out ? DType::F32 : DType::BF16);
  qlinear(b.gpu, gx, {w.gcodes, w.gscales}, out);
  const bool wgmma = cuda::int_gemm_wgmma_applies(s.bits, s.K, s.G, b.gpu.wgmma());
  const cuda::IntLinearKernel plan = cuda::plan_int_linear({T, s.N, false, b.gpu.kernel_options().int_gemm, wgmma});
  const std::string what = std::string(int_gemv_name(b.gpu.kernel_options().int_gemv)) + " U" + std::to_string(s.bits) +
                           " T " + std::to_string(T) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                           " G " + std::to_string(s.G) + (zero ? " zero" : " sym") + (perm ? " perm" : "") +
                           (f32_out ? " f32" : "") + " (" + kernel_name(plan) + ")";
  const bool rounded = plan == cuda::IntLinearKernel::DequantizeGemm || plan == cuda::IntLinearKernel::GemmWgmma;
  expect_close(b.gpu.to_host_f32(out), reference(w, x, T, rounded), f32_out ? 1.0 / 1024 : 1.0 / 256,
               f32_out || rounded ? 1.0 / 512 : 1.0 / 128, what);
}

TEST(CudaIntWeights, LinearAwkwardShapesAgainstTheReference) {
  REQUIRE_GPU();
  // N past a 16-row block; K past a 64-column tile (160, 208, 288); groups of 16..K, some not powers
  // of two (48, 96: tiles straddle groups); U8 with its 32-column tile. T: v2's 1, 2 and 4 n-tiles
  // (1..8, 9..16, 17..32), the dequantize path past 32.
  const Shape3 shapes[] = {{4, 200, 192, 32}, {4, 72, 384, 128}, {4, 24, 160, 160}, {4, 40, 208, 16},
                           {4, 40, 288, 96},  {8, 40, 96, 48},   {8, 56, 256, 64},  {8, 33, 160, 32}};
  for (IntGemv v : kGemvs) {
    test::Backends b(with_gemv(v));
    for (const Shape3& s : shapes)
      for (int64_t T : {1, 3, 8, 9, 17, 32, 300})
        for (bool zero : {true, false}) check_linear(b, s, T, zero, /*perm=*/T % 2 == 1, false);
    for (int64_t T : {1, 5, 12, 40}) check_linear(b, {4, 96, 256, 64}, T, true, false, true);  // F32 partial sums
    for (int64_t T : {2, 8, 24, 33}) check_linear(b, {8, 96, 256, 128}, T, false, true, true);
  }
}

// The tensor-core GEMM (int_gemm.cu, T 33..256) at awkward shapes: T 33 / 57 / 100 / 256 (one to
// four column tiles of 64, rows past T), N past a 128-row tile and past a 16-row block, K past a
// 64-column tile, groups of 16..K columns incl. ones that split a tile (48, 32) and split-K ranges
// that end inside a group (K 1056 in groups of 48, 4 splits), U4 and U8, zero points and
// symmetric, act order; F32 out at the GEMV's tight tolerance (the weights are never rounded).
// K >= 512 splits K (kernel_plan.h: int_gemm_splits, 256 columns a split at least) on any GPU of
// 8+ SMs.
TEST(CudaIntWeights, TensorCoreGemmAwkwardShapesAgainstTheReference) {
  REQUIRE_GPU();
  KernelOptions o;
  o.int_gemm = IntGemm::Mma;  // opt-in (the default is dequantize)
  test::Backends b(o);
  const Shape3 shapes[] = {{4, 200, 1024, 128}, {4, 40, 1056, 48}, {4, 136, 512, 32}, {4, 24, 160, 160},
                           {4, 72, 384, 128},   {8, 56, 1024, 64}, {8, 40, 96, 48},   {8, 33, 160, 32}};
  for (const Shape3& s : shapes)
    for (int64_t T : {33, 57, 100, 256}) {
      ASSERT_EQ(cuda::plan_int_linear({T, s.N, false, IntGemm::Mma}), cuda::IntLinearKernel::Gemm) << T;
      for (bool zero : {true, false}) check_linear(b, s, T, zero, /*perm=*/T % 2 == 1, false);
    }
  for (int64_t T : {40, 200}) check_linear(b, {4, 96, 512, 64}, T, true, false, true);
  check_linear(b, {4, 1000, 4096, 128}, 200, false, true, false);  // K 4096, symmetric, act order
  for (int64_t T : {33, 128}) check_linear(b, {8, 130, 256, 128}, T, false, true, true);
}

// linear_silu_mul at T rows for I outputs (a [2I, K] weight in groups of G) against the reference:
// silu(gate) * up with the rounding of silu_and_mul after a BF16 product (BF16 gate, up, silu and
// output): the tolerance of the BF16 outputs above, doubled for the product.
void check_silu(test::Backends& b, int bits, int64_t I, int64_t K, int64_t G, int64_t T, bool perm) {
  auto bf = [](double v) { return double(test::bf16_round(float(v))); };
  const IntWeight w = make_weight(b.gpu, bits, 2 * I, K, G, bits == 4, perm, uint32_t(I + T + bits));
  const std::vector<float> x = test::rand_bf16(size_t(T * K), uint32_t(T), -1.f, 1.f);
  Tensor gx = b.gpu.empty({T, K}, DType::BF16);
  b.gpu.upload(x.data(), DType::F32, gx);
  Tensor out = b.gpu.empty({T, I}, DType::BF16);
  qsilu(b.gpu, gx, {w.gcodes, w.gscales}, out);
  const std::vector<double> gu = reference(w, x, T);
  double sg = 0, su = 0;  // rms of gate and up
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < I; ++n) {
      sg += gu[size_t(t * 2 * I + n)] * gu[size_t(t * 2 * I + n)];
      su += gu[size_t(t * 2 * I + I + n)] * gu[size_t(t * 2 * I + I + n)];
    }
  sg = std::sqrt(sg / double(T * I)), su = std::sqrt(su / double(T * I));
  // Each factor's error reaches the product times the other factor: the dequantize path's BF16
  // weights summed over K (2^-9 of the factor's rms per weight: 2^-7 of its rms bounds the
  // tail) and a BF16 rounding of the factor that lands on the neighbouring value (one ulp,
  // at most 2^-7 of it); plus 2^-7 of the value (silu's and the output's BF16 rounding).
  const std::vector<float> got = b.gpu.to_host_f32(out);
  size_t bad = 0;
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < I; ++n) {
      const double g = bf(gu[size_t(t * 2 * I + n)]), u = bf(gu[size_t(t * 2 * I + I + n)]);
      const double silu = bf(g / (1 + std::exp(-g))), want = silu * u;
      const double tol =
          std::abs(want) / 128 + (std::abs(u) * (sg + std::abs(g)) + std::abs(silu) * (su + std::abs(u))) / 128;
      const double err = std::abs(double(got[size_t(t * I + n)]) - want);
      bad += !(err <= tol);
      worst = std::max(worst, err / tol);
    }
  EXPECT_EQ(bad, 0u) << std::string(int_gemv_name(b.gpu.kernel_options().int_gemv)) << " silu U" << bits << " I " << I
                     << " K " << K << " T " << T << ": worst error " << worst << " x its tolerance";
}

TEST(CudaIntWeights, GatedMlpFusionAgainstTheReference) {
  REQUIRE_GPU();
  // I 48: the GEMV's fused epilogue (I % 16 == 0); I 40: the plain GEMV then silu_and_mul (T <= 32),
  // or the GEMM then silu_and_mul (T 33..256; neither is a multiple of the GEMM's 64), or the
  // dequantize path (T 300).
  for (IntGemv v : kGemvs) {
    test::Backends b(with_gemv(v));
    for (int64_t I : {48, 40})
      for (int bits : {4, 8})
        for (int64_t T : {1, 5, 8, 12, 20, 70, 300}) check_silu(b, bits, I, 192, 64, T, T == 5 || T == 70);
  }
  // The GEMM's fused epilogue (I a multiple of 64: gate and up halves of a CTA tile), one split (K
  // 192) and several (K 1024), one and several column tiles.
  test::Backends b;
  for (int64_t I : {64, 192})
    for (int bits : {4, 8})
      for (int64_t K : {192, 1024})
        for (int64_t T : {33, 130}) check_silu(b, bits, I, K, 64, T, T == 33);
}

// The Hopper GEMM (int_gemm_wgmma.cu: U4, K and G multiples of 64) at awkward shapes: T 33 / 57 /
// 100 / 256 (one to four column tiles, rows past T read as TMA zeros), N past a 128-row tile and a
// 16-row block (row blocks past the weight's end are not copied), groups of 64 / 128 / K, split-K
// (K >= 512), act order (x gathered, then put in the mma's k order), F32 out; the gated MLP fused
// (I a multiple of 64) at one and several splits. The weights are rounded to BF16 as on the
// dequantize path, so the tolerances are that path's.
const Shape3 kWgmmaShapes[] = {
    {4, 200, 1024, 128}, {4, 136, 512, 64}, {4, 72, 384, 128}, {4, 40, 2048, 64}, {4, 1000, 4096, 128}};
// The wide form's tiles (past 64 rows: two column tiles a CTA) under b's int_gemm (wgmma_wide:
// int_gemm_wgmma_wide.cu; wgmma_ss: int_gemm_wgmma_ss.cu): the second tile partly past T (T 100,
// 200) or wholly padding (T 130: 3 column tiles), N past a tile, groups of 64 / 128, split K (N
// 1000, K 4096; N 136, K 512), act order, F32 out, the gated MLP fused at one and several splits.
void check_wide_form(test::Backends& b) {
  const IntGemm gemm = b.gpu.kernel_options().int_gemm;
  for (const Shape3& s : kWgmmaShapes)
    for (int64_t T : {65, 100, 130, 200, 256}) {
      ASSERT_TRUE(cuda::int_gemm_wgmma_wide(gemm, T, {1, 1}, false));
      ASSERT_EQ(cuda::int_gemm_wgmma_ss(gemm, T, {1, 1}, false), gemm == IntGemm::WgmmaSs);
      check_linear(b, s, T, T != 100, /*perm=*/T % 2 == 1, T == 200);
    }
  check_linear(b, {4, 1000, 4096, 128}, 200, false, true, false);  // K 4096, symmetric, act order
  for (int64_t I : {64, 192})
    for (int64_t K : {256, 1024})
      for (int64_t T : {65, 130, 256}) check_silu(b, 4, I, K, 64, T, T == 65);
}
TEST(CudaIntWeights, WgmmaGemmAwkwardShapesAgainstTheReference) {
  REQUIRE_GPU();
  KernelOptions o;
  o.int_gemm = IntGemm::Wgmma;
  test::Backends b(o);
  ASSERT_TRUE(b.gpu.wgmma()) << "the H100 / H200 this suite runs on has sm_90a code";
  for (const Shape3& s : kWgmmaShapes)
    for (int64_t T : {33, 57, 100, 256}) {
      ASSERT_EQ(cuda::plan_int_linear({T, s.N, false, IntGemm::Wgmma, true}), cuda::IntLinearKernel::GemmWgmma);
      for (bool zero : {true, false}) check_linear(b, s, T, zero, /*perm=*/T % 2 == 1, false);
    }
  for (int64_t T : {40, 200}) check_linear(b, {4, 96, 512, 64}, T, true, false, true);
  check_linear(b, {4, 1000, 4096, 128}, 200, false, true, false);  // K 4096, symmetric, act order
  for (int64_t I : {64, 192})
    for (int64_t K : {256, 1024})
      for (int64_t T : {33, 130, 256}) check_silu(b, 4, I, K, 64, T, T == 33);
  // Clusters (TMA multicast): row tiles sharing x, column tiles sharing codes and scales, the plan
  // taking fewer where the tiles do not fill them; row tiles short of a whole cluster (N 200: 2
  // tiles; N 1000: 8; the gated MLP's I 192: 3), column tiles short of one (T 130: 3), split K (N
  // 1000, K 4096), groups of 64 (two a stage).
  const std::pair<int, int> clusters[] = {{2, 1}, {4, 1}, {2, 2}, {4, 2}, {2, 4}, {1, 4}};
  for (const auto& [rows, cols] : clusters) {
    KernelOptions oc = o;
    oc.int_gemm_cluster_rows = rows, oc.int_gemm_cluster_cols = cols;
    test::Backends bc(oc);
    SCOPED_TRACE("int_gemm_cluster " + std::to_string(rows) + "x" + std::to_string(cols));
    for (const Shape3& s : {Shape3{4, 200, 1024, 128}, Shape3{4, 136, 512, 64}})
      for (int64_t T : {33, 100, 256}) check_linear(bc, s, T, T != 100, /*perm=*/T == 33, T == 100);
    check_linear(bc, {4, 1000, 4096, 128}, 256, true, false, false);  // 32 tiles: K in 8 splits
    for (int64_t T : {57, 130, 256}) check_silu(bc, 4, 192, 1024, 64, T, T == 57);
  }
  KernelOptions ow;
  ow.int_gemm = IntGemm::WgmmaWide;
  test::Backends bw(ow);
  check_wide_form(bw);
  // Channel-wise groups (G = K: one {scale, zero} per row; the reference's tolerance does not hold
  // for BF16-rounded weights whose rounding errors share one scale): the dequantize path's outputs
  // (the same BF16 weights, F32 sums in another order), within a BF16 rounding of the largest.
  KernelOptions od;
  od.int_gemm = IntGemm::Dequantize;
  test::Backends bd(od);
  for (int64_t T : {57, 256}) {
    const int64_t N = 24, K = 640;
    const IntWeight w = make_weight(b.gpu, 4, N, K, K, true, false, 11),
                    wd = make_weight(bd.gpu, 4, N, K, K, true, false, 11);
    const std::vector<float> x = test::rand_bf16(size_t(T * K), uint32_t(T), -1.f, 1.f);
    Tensor gx = b.gpu.empty({T, K}, DType::BF16), gxd = bd.gpu.empty({T, K}, DType::BF16);
    b.gpu.upload(x.data(), DType::F32, gx);
    bd.gpu.upload(x.data(), DType::F32, gxd);
    Tensor out = b.gpu.empty({T, N}, DType::BF16), outd = bd.gpu.empty({T, N}, DType::BF16);
    qlinear(b.gpu, gx, {w.gcodes, w.gscales}, out);
    qlinear(bd.gpu, gxd, {wd.gcodes, wd.gscales}, outd);
    const std::vector<float> o = b.gpu.to_host_f32(out), od2 = bd.gpu.to_host_f32(outd);
    float big = 0, diff = 0;
    for (size_t i = 0; i < o.size(); ++i)
      big = std::max(big, std::fabs(od2[i])), diff = std::max(diff, std::fabs(o[i] - od2[i]));
    EXPECT_LE(diff, big / 128) << "channel-wise T " << T;
    EXPECT_GT(big, 0.f);
  }
}

// The wide form's tiles with the weights dequantized into shared memory by a third warpgroup and
// SS products (int_gemm=wgmma_ss, int_gemm_wgmma_ss.cu; one CTA an SM, so other K splits): the wide
// form's cases (check_wide_form).
TEST(CudaIntWeights, WgmmaSsGemmAwkwardShapesAgainstTheReference) {
  REQUIRE_GPU();
  KernelOptions o;
  o.int_gemm = IntGemm::WgmmaSs;
  test::Backends b(o);
  ASSERT_TRUE(b.gpu.wgmma()) << "the H100 / H200 this suite runs on has sm_90a code";
  check_wide_form(b);
}

// v3's split of K across a cluster of CTAs (sm_90+): row counts chosen from this GPU's SM count so
// that int_gemv_v3_splits picks S > 1 (1.125 waves of row blocks: the second wave an eighth full),
// plain and gated, at one, two and four n-tiles, U4 and U8, against the reference; and the outputs
// equal v2's up to BF16 rounding of the same F32 sums (v3 takes U4's zero out through sums of x).
TEST(CudaIntWeights, V3SplitsKAcrossAClusterAgainstTheReference) {
  REQUIRE_GPU();
  int dev = 0, sms = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  // A grid under half a wave unsplit: the plan splits K (kernel_plan.cpp).
  const int64_t slots = int64_t(sms) * cuda::kIntGemvV3CtasPerSm, rows = slots / 4 + 3;
  test::Backends b(with_gemv(IntGemv::V3));
  for (int bits : {4, 8}) {
    const int64_t K = bits == 4 ? 4096 : 2048;  // 64 tiles a row block
    for (int64_t T : {1, 12, 20}) {
      const int splits = cuda::int_gemv_v3_splits(T, rows * 16, false, K, 128, bits, sms, major >= 9);
      if (major >= 9) EXPECT_GT(splits, 1) << "U" << bits << " T " << T << " on " << sms << " SMs";
      check_linear(b, {bits, rows * 16 - 5, K, 128}, T, bits == 4, false, T == 12);
    }
  }
  const int64_t I = rows * 16;
  if (major >= 9) EXPECT_GT(cuda::int_gemv_v3_splits(1, I, true, 4096, 128, 4, sms, true), 1);
  check_silu(b, 4, I, 4096, 128, 1, false);
  check_silu(b, 8, I, 2048, 128, 3, false);
}

// The GEMV's outputs on `gpu` (a backend of one int_gemv variant) for x [T, K] and the prepared
// weight: the linear into [T, outs] (BF16 or F32), or with silu the gated MLP into [T, outs].
std::vector<float> gemv_outputs(CudaBackend& gpu, const std::vector<float>& x, int64_t T, int64_t K,
                                const IntWeightRef& w, int64_t outs, bool silu, bool f32_out) {
  Tensor gx = gpu.empty({T, K}, DType::BF16);
  gpu.upload(x.data(), DType::F32, gx);
  Tensor out = gpu.empty({T, outs}, f32_out ? DType::F32 : DType::BF16);
  if (silu)
    qsilu(gpu, gx, w, out);
  else
    qlinear(gpu, gx, w, out);
  return gpu.to_host_f32(out);
}

// Elements of a and b that differ (bit patterns: -0 against 0 counts, as would a NaN).
size_t bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  size_t bad = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return bad;
}

// v4 (int_gemv_v4.cu) is v3's arithmetic (unsplit) on a persistent grid, so its outputs equal v3's
// bit for bit wherever v3 does not split K. Qwen3-8B's layers (AWQ-quantized on the GPU: qkv, o,
// down, and the gated MLP with its fused SiLU) at T 1, 4 and 17 (one and four n-tiles); then, from
// the host quantizer, row counts of 1.5 waves of v4 CTAs and more (each CTA walks several row
// blocks, its rings running from one into the next) at awkward shapes: N not a multiple of 16; the
// general path (groups of 48 that split the 64-column tiles, K 2064 past a tile); groups of 3
// tiles (G 192) and channel-wise (G = K) on the fast path; K of 3 tiles (warps with no tiles);
// U8 codes, fast and general; the gated MLP in U4 and U8; T 1..32 (1, 2 and 4 n-tiles), F32 out.
// Qwen3-8B's layers, and awkward shapes of about 1.5 waves of persistent CTAs (`slots` per wave), on
// which the persistent GEMVs (v4, v5) walk more than one row block per CTA.
struct GemvLayer {
  const char* name;
  int64_t n, k;
  bool silu;
};
const GemvLayer kQwen3_8bLayers[] = {
    {"qkv", 6144, 4096, false}, {"o", 4096, 4096, false}, {"down", 4096, 12288, false}, {"gate_up", 24576, 4096, true}};
struct GemvCase {
  int bits;
  int64_t N, K, G;
  bool silu, perm;
};
std::vector<GemvCase> persistent_cases(int64_t slots) {
  const int64_t rows = slots * 3 / 2 + 5;
  return {
      {4, rows * 16 - 5, 2064, 48, false, false},  // general path; N past a row block
      {4, rows * 16 - 9, 3072, 192, false, true},  // three tiles a group; act order
      {4, rows * 32 - 3, 192, 64, false, false},   // three tiles a row block: warps 3..7 idle
      {4, rows * 16, 2048, 2048, false, false},    // channel-wise
      {8, rows * 16 - 5, 2048, 128, false, false}, {8, rows * 16 - 7, 1040, 80, false, false},  // U8 general path
      {4, rows * 16, 2048, 128, true, false},                                                   // gated MLP: N = I
      {4, rows * 16, 2064, 48, true, false},       {8, rows * 16, 1024, 64, true, false},
  };
}

// Runs `check(what, v3 outputs, other outputs)` for GEMV `other` against v3 (one split) on
// kQwen3_8bLayers at T 1, 4, 17 and on persistent_cases at T 1..32 (BF16 and F32 out).
void compare_with_v3(
    IntGemv other, int64_t slots,
    const std::function<void(const std::string&, const std::vector<float>&, const std::vector<float>&)>& check) {
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  CudaBackend g3(0, with_gemv(IntGemv::V3)), g4(0, with_gemv(other));
  for (const GemvLayer& l : kQwen3_8bLayers) {
    const std::vector<float> v = test::rand_bf16(size_t(l.n * l.k), uint32_t(l.n + l.k), -0.05f, 0.05f);
    Tensor c3, c4;
    WeightScales s3, s4;
    for (auto [gpu, c, s] : {std::tuple{&g3, &c3, &s3}, std::tuple{&g4, &c4, &s4}}) {
      Tensor w = gpu->empty({l.n, l.k}, DType::BF16);
      gpu->upload(v.data(), DType::F32, w);
      gpu->quantize_weight(w, Quantization::AWQ, *c, *s);
    }
    const int64_t outs = l.silu ? l.n / 2 : l.n;
    for (int64_t T : {1, 4, 17}) {
      ASSERT_EQ(cuda::int_gemv_v3_splits(T, outs, l.silu, l.k, 128, 4, sms, true), 1) << l.name;
      const std::vector<float> x = test::rand_bf16(size_t(T * l.k), uint32_t(T));
      const std::vector<float> o3 = gemv_outputs(g3, x, T, l.k, {c3, s3}, outs, l.silu, false);
      const std::vector<float> o4 = gemv_outputs(g4, x, T, l.k, {c4, s4}, outs, l.silu, false);
      check(std::string(l.name) + " T " + std::to_string(T), o3, o4);
    }
  }
  for (const GemvCase& c : persistent_cases(slots)) {
    IntWeight w = make_weight(g3, c.bits, c.silu ? 2 * c.N : c.N, c.K, c.G, c.bits == 4, c.perm, uint32_t(c.N + c.K));
    IntWeight w4 = w;
    upload_weight(g4, w4);
    for (int64_t T : {1, 4, 12, 17, 32})
      for (bool f32 : {false, true}) {
        if (f32 && (c.silu || T % 2 == 0)) continue;
        const std::string what = "U" + std::to_string(c.bits) + " N " + std::to_string(c.N) + " K " +
                                 std::to_string(c.K) + " G " + std::to_string(c.G) + (c.silu ? " silu" : "") + " T " +
                                 std::to_string(T) + (f32 ? " f32" : "");
        ASSERT_EQ(cuda::int_gemv_v3_splits(T, c.N, c.silu, c.K, c.G, c.bits, sms, true), 1) << what;
        const std::vector<float> x = test::rand_bf16(size_t(T * c.K), uint32_t(T + c.K));
        const std::vector<float> o3 = gemv_outputs(g3, x, T, c.K, {w.gcodes, w.gscales}, c.N, c.silu, f32);
        const std::vector<float> o4 = gemv_outputs(g4, x, T, c.K, {w4.gcodes, w4.gscales}, c.N, c.silu, f32);
        check(what, o3, o4);
      }
  }
}

int sm_count() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms;
}

TEST(CudaIntWeights, V4EqualsV3BitForBit) {
  REQUIRE_GPU();
  compare_with_v3(IntGemv::V4, int64_t(sm_count()) * cuda::kIntGemvV4CtasPerSm,
                  [](const std::string& what, const std::vector<float>& o3, const std::vector<float>& o4) {
                    EXPECT_EQ(bit_differences(o3, o4), 0u) << what;
                  });
}

// v5 (rings in shared memory, 16-warp CTAs at T <= 8) sums each row's F32 terms in another order
// than v3 (other K runs per warp): F32 outputs differ by that rounding (~1e-6 relative; bound
// 2^-10 of the value and 2^-9 of the rms, check_linear's), BF16 outputs by a rounding flip (one
// BF16 ulp: at most 2^-7 of the value; with the gated MLP a flip of the gate's rounding goes
// through SiLU and the product: bound 2^-6 of the value and 2^-7 of the rms). A wrong fragment or
// a tile summed twice is off by O(1). Where v5 runs 8-warp CTAs (T > 8 with the gated MLP, T > 16)
// its arithmetic is v3's (equal bits; not asserted).
TEST(CudaIntWeights, V5MatchesV3OnPersistentGrids) {
  REQUIRE_GPU();
  compare_with_v3(IntGemv::V5, int64_t(sm_count()) * cuda::kIntGemvV5CtasPerSm,
                  [](const std::string& what, const std::vector<float>& o3, const std::vector<float>& o5) {
                    const bool f32 = what.size() > 4 && what.compare(what.size() - 4, 4, " f32") == 0;
                    expect_close(o5, std::vector<double>(o3.begin(), o3.end()), f32 ? 1.0 / 1024 : 1.0 / 64,
                                 f32 ? 1.0 / 512 : 1.0 / 128, "v5 against v3: " + what);
                  });
}

// quantize_weight (--load-format dummy): int_quantize_weight's codes and scales from the same BF16
// weight, seen through the tensor-core GEMM with x = the identity (T = K = 256: out[t][n] = value[n][t]
// rounded to BF16; the scale is F16 on the GPU: 2^-11 relative). A code one step off would be off by a whole
// scale, at least 1/15 of the value: far outside 2^-7.
TEST(CudaIntWeights, DummyQuantizationMatchesTheHostReference) {
  REQUIRE_GPU();
  test::Backends b;
  for (Quantization q : {Quantization::AWQ, Quantization::GPTQ, Quantization::CompressedTensors}) {
    EXPECT_TRUE(b.gpu.supports_quantization(q));
    const int64_t N = 40, K = 256;  // two groups of 128
    const std::vector<float> v = test::rand_bf16(size_t(N * K), 7, -0.1f, 0.12f);
    Tensor w = b.gpu.empty({N, K}, DType::BF16);
    b.gpu.upload(v.data(), DType::F32, w);
    Tensor codes;
    WeightScales scales;
    b.gpu.quantize_weight(w, q, codes, scales);
    EXPECT_EQ(codes.dtype(), DType::U4);
    EXPECT_EQ(scales.block_k, 128);
    IntWeight host;
    Tensor f = Tensor::host({N, K}, DType::F32);
    std::copy(v.begin(), v.end(), f.data<float>());
    int_quantize_weight(f, 4, 128, q == Quantization::AWQ, host.codes, host.scales);
    std::vector<float> eye(size_t(K * K), 0.f);
    for (int64_t k = 0; k < K; ++k) eye[size_t(k * K + k)] = 1.f;
    Tensor gx = b.gpu.empty({K, K}, DType::BF16);
    b.gpu.upload(eye.data(), DType::F32, gx);
    Tensor out = b.gpu.empty({K, N}, DType::BF16);
    qlinear(b.gpu, gx, {codes, scales}, out);
    const std::vector<float> got = b.gpu.to_host_f32(out);
    std::vector<float> row(static_cast<size_t>(K));
    size_t bad = 0;
    for (int64_t n = 0; n < N; ++n) {
      int_dequantize_row(host.codes, host.scales, n, 0, K, row.data());
      for (int64_t k = 0; k < K; ++k) {
        const float want = row[size_t(k)], g = got[size_t(k * N + n)];
        if (!(std::abs(g - want) <= std::abs(want) / 128)) ++bad;
      }
    }
    EXPECT_EQ(bad, 0u) << quantization_name(q);
  }
}

TEST(CudaIntWeights, Refusals) {
  REQUIRE_GPU();
  CudaBackend gpu(0);
  auto expect_user_error = [](auto&& f, const std::string& want) {
    try {
      f();
      ADD_FAILURE() << "accepted; wanted: " << want;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  // Groups of 8 columns: no k-step of the layout fits.
  Tensor codes = gpu.empty({16, 64}, DType::U4);
  WeightScales s;
  s.block_k = 8;
  s.scale = gpu.empty({16, 8}, DType::F32);
  expect_user_error([&] { gpu.prepare_int_weight(codes, s); }, "group size that is a multiple of 16");
  // A zero point that is not an integer of the code range.
  Tensor c2 = gpu.empty({16, 64}, DType::U4);
  WeightScales s2;
  s2.block_k = 32;
  std::vector<float> ones(32, 1.f), zeros(32, 3.5f);
  s2.scale = gpu.empty({16, 2}, DType::F32);
  s2.zero = gpu.empty({16, 2}, DType::F32);
  gpu.upload(ones.data(), DType::F32, s2.scale);
  gpu.upload(zeros.data(), DType::F32, s2.zero);
  expect_user_error([&] { gpu.prepare_int_weight(c2, s2); }, "zero point is not an integer");
  // A canonical (unprepared) weight reaching the linear.
  Tensor c3 = gpu.empty({16, 64}, DType::U4), x = gpu.empty({1, 64}, DType::BF16),
         out = gpu.empty({1, 16}, DType::BF16);
  WeightScales s3;
  s3.block_k = 32;
  s3.scale = gpu.empty({16, 2}, DType::F32);
  EXPECT_THROW(qlinear(gpu, x, {c3, s3}, out), Error);
}

// add_rms_norm_linear_quantized with the norm as the GEMV's prologue (int_gemv_norm.cuh: gemv_norm
// auto) against add_rms_norm + the same GEMV (gemv_norm never), under int_gemv auto / v3 / v4:
// Qwen3-8B's qkv at T 1 (v3 wide), a gated MLP past a wave of v3 (v4), a small grid (v3, K split
// over a cluster), U8, a gated MLP whose I the epilogue cannot split (the plain GEMV then
// silu_and_mul), T 1..8 (rows of x past T in the n-tile), and the calls it must not fuse (act order,
// groups that split a tile, T 9). The new residual (bf16(x + residual)) equals the separate kernel's
// bit for bit and lands in a new buffer exactly where fused; the outputs differ only where 1 / rms,
// summed in another order, rounds a normalized value the other way (one BF16 ulp of one term; a
// wrong row or chunk is off by O(1)): v5's bounds against v3.
TEST(CudaIntWeights, NormPrologueEqualsAddRmsNormThenTheGemv) {
  REQUIRE_GPU();
  struct Case {
    int bits;
    int64_t N, K, G, T;
    bool silu, perm, fused;
  };
  const std::vector<Case> cases = {
      {4, 6144, 4096, 128, 1, false, false, true}, {4, 9600, 2048, 128, 1, true, false, true},
      {4, 9600, 1024, 128, 8, true, false, true},  {4, 1000, 1024, 64, 3, false, false, true},
      {8, 2048, 2048, 128, 2, false, false, true}, {4, 2 * 1000, 1024, 128, 5, true, false, true},
      {4, 512, 1024, 128, 1, false, true, false},  {4, 500, 1056, 48, 1, false, false, false},
      {4, 512, 1024, 128, 9, false, false, false},
  };
  for (IntGemv v : {IntGemv::Auto, IntGemv::V3, IntGemv::V4}) {
    KernelOptions on = with_gemv(v), off = with_gemv(v);
    off.gemv_norm = GemvNormFusion::Never;
    CudaBackend gf(0, on), gn(0, off);
    for (const Case& c : cases) {
      IntWeight w = make_weight(gf, c.bits, c.N, c.K, c.G, true, c.perm, uint32_t(c.N + c.K));
      IntWeight wn = w;
      upload_weight(gn, wn);
      const int64_t outs = c.silu ? c.N / 2 : c.N;
      const std::string what = std::string(int_gemv_name(v)) + " U" + std::to_string(c.bits) + " N " +
                               std::to_string(c.N) + " K " + std::to_string(c.K) + " G " + std::to_string(c.G) + " T " +
                               std::to_string(c.T) + (c.silu ? " silu" : "") + (c.perm ? " perm" : "");
      const std::vector<float> x = test::rand_bf16(size_t(c.T * c.K), uint32_t(c.K + 1), -2.f, 2.f);
      const std::vector<float> r = test::rand_bf16(size_t(c.T * c.K), uint32_t(c.K + 2), -4.f, 4.f);
      const std::vector<float> nw = test::rand_bf16(size_t(c.K), uint32_t(c.K + 3), 0.5f, 1.5f);
      std::vector<float> outs_of[2], res_of[2];
      bool moved[2] = {false, false};
      for (int i = 0; i < 2; ++i) {
        CudaBackend& gpu = i == 0 ? gf : gn;
        const IntWeight& wi = i == 0 ? w : wn;
        Tensor gx = gpu.empty({c.T, c.K}, DType::BF16), gr = gpu.empty({c.T, c.K}, DType::BF16);
        Tensor gw = gpu.empty({c.K}, DType::BF16), out = gpu.empty({c.T, outs}, DType::BF16);
        gpu.upload(x.data(), DType::F32, gx);
        gpu.upload(r.data(), DType::F32, gr);
        gpu.upload(nw.data(), DType::F32, gw);
        const void* before = gr.raw();
        static_cast<Backend&>(gpu).add_rms_norm_linear_quantized(gx, gr, gw, 1e-6f, wi.gcodes, wi.gscales, out, c.silu);
        moved[i] = gr.raw() != before;
        outs_of[i] = gpu.to_host_f32(out);
        res_of[i] = gpu.to_host_f32(gr);
      }
      EXPECT_EQ(moved[0], c.fused) << what << ": the norm " << (c.fused ? "was not" : "was") << " fused";
      EXPECT_FALSE(moved[1]) << what << ": fused under gemv_norm never";
      EXPECT_EQ(bit_differences(res_of[0], res_of[1]), 0u) << what << ": the new residual";
      expect_close(outs_of[0], std::vector<double>(outs_of[1].begin(), outs_of[1].end()), 1.0 / 64, 1.0 / 128,
                   "fused against add_rms_norm + GEMV: " + what);
    }
  }
}

// A decode-sized product (T 1, 4 and 20: the GEMV; 100: the tensor-core GEMM, K split in two for
// the first linear, its partials summed by a second kernel; act order, with the gated MLP) captured
// into a CUDA graph: replays equal the eager run bit for bit, and follow new inputs written into the
// same buffer.
TEST(CudaIntWeights, CudaGraphOfDecodeProducts) {
  REQUIRE_GPU();
  for (IntGemv v : kGemvs) {
    test::Backends b(with_gemv(v));
    CudaBackend& gpu = b.gpu;
    for (int64_t T : {1, 4, 20, 100}) {
      const int64_t K = 512, N = 256, I = 128;
      const IntWeight wo = make_weight(gpu, 4, N, K, 128, true, true, 11);
      const IntWeight wgu = make_weight(gpu, 4, 2 * I, N, 128, true, false, 12);
      Tensor x = gpu.empty({T, K}, DType::BF16);
      gpu.upload(test::rand_bf16(size_t(T * K), 1).data(), DType::F32, x);
      auto chain = [&] {
        Tensor y = gpu.empty({T, N}, DType::BF16);
        qlinear(gpu, x, {wo.gcodes, wo.gscales}, y);
        Tensor h = gpu.empty({T, I}, DType::BF16);
        qsilu(gpu, y, {wgu.gcodes, wgu.gscales}, h);
        return h;
      };
      gpu.begin_step();
      const std::vector<float> eager1 = gpu.to_host_f32(chain());
      gpu.synchronize();
      gpu.begin_step();
      gpu.graph_capture_begin();
      Tensor h = chain();
      const int64_t exec = gpu.graph_capture_end();
      gpu.graph_replay(exec);
      gpu.synchronize();
      EXPECT_EQ(gpu.to_host_f32(h), eager1) << T;
      gpu.upload(test::rand_bf16(size_t(T * K), 2).data(), DType::F32, x);
      gpu.graph_replay(exec);
      gpu.synchronize();
      const std::vector<float> replayed = gpu.to_host_f32(h);
      gpu.begin_step();
      const std::vector<float> eager2 = gpu.to_host_f32(chain());
      gpu.synchronize();
      EXPECT_EQ(replayed, eager2) << T;
      EXPECT_NE(eager1, eager2) << T;
      gpu.graph_destroy(exec);
    }
  }
}

// The engine on the tiny AWQ / GPTQ / compressed-tensors fixtures (tests/fixtures/int-checkpoints:
// the same codes on both backends, whatever the act order), CUDA (GEMV at decode, dequantize + GEMM
// for the prompts, CUDA graphs) against the CPU backend's exact reference: the logits differ by BF16
// activation rounding only (the bound of the FP8 weight-only comparison, 0.995). (Quantizing at
// load is not compared here: the CPU's exact path quantizes F32 weights, CUDA BF16-rounded ones, and
// a code one step apart moves a weight by a whole scale; DummyQuantizationMatchesTheHostReference
// holds the GPU's quantizer to the host's on the same values.)
TEST(CudaIntWeights, EngineOnCheckpointsAgainstTheCpu) {
  REQUIRE_GPU();
  for (const char* fx : {"qwen3-awq", "qwen3-gptq-actorder", "qwen3-gptq8-asym", "llama-awq",
                         "llama-ct-w4a16-asym-actorder", "llama-gptq-asym-channel"}) {
    EngineConfig cfg = test::tiny_cfg(test::fixture(std::string("int-checkpoints/") + fx));
    LLMEngine cpu(cfg);
    cfg.device = DeviceChoice::Cuda;
    cfg.kv_cache_memory = 64 << 20;
    LLMEngine gpu(cfg);
    EXPECT_EQ(gpu.model_runner().quantization(), cpu.model_runner().quantization()) << fx;
    EXPECT_TRUE(is_int_weight_only(gpu.model_runner().quantization())) << fx;
    const test::Agreement g = test::compare_greedy(cpu, gpu, 6, 16);
    std::printf("[gpu] %s: cuda vs cpu: %zu/%zu greedy tokens, worst logits cosine %.6f over %zu steps\n", fx, g.same,
                g.total, g.worst_cosine, g.compared);
    EXPECT_EQ(g.total, 96u);
    EXPECT_GE(g.worst_cosine, 0.995) << fx;
    EXPECT_GE(g.compared, 12u) << fx;
  }
}

}  // namespace
