// Dequantize-at-load of MoE experts (int_experts.h): rows of one expert tensor in the canonical
// host layout (codes one a byte, zeros explicit), dequantized row by row, on a few threads when the
// tensor is large (Qwen3-30B-A3B has 18,432 of them).
#include "nanovllm/models/int_experts.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "nanovllm/backends/int_weights.h"
#include "nanovllm/models/int_formats.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// fn(r0, r1) over [0, rows) in contiguous chunks, on up to hardware_concurrency threads when the
// work (rows x cols values) is worth them; the first exception is rethrown.
template <class Fn>
void for_row_chunks(int64_t rows, int64_t cols, const Fn& fn) {
  const int64_t threads = std::clamp<int64_t>(int64_t(std::thread::hardware_concurrency()), 1, 32);
  const int64_t n = rows * cols < (int64_t(1) << 20) ? 1 : std::min(threads, rows);
  if (n <= 1) {
    fn(int64_t(0), rows);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < n; ++t)
    pool.emplace_back([&, t] {
      try {
        fn(rows * t / n, rows * (t + 1) / n);
      } catch (...) {
        errors[size_t(t)] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The rows [r0, r1) of the spec's destination (this rank's rows of its slice), checked against it.
Tensor dst_rows(const WeightSpec& s) {
  const Shape local = s.local_shape();
  if (local.size() != 2 || s.dst->dim() != 2 || s.dst->size(1) != local[1] || s.row_offset + local[0] > s.dst->size(0))
    throw Error("MoE expert '" + s.name + "': its slice " + shape_str(local) + " at row " +
                std::to_string(s.row_offset) + " does not fit the expert tensor " + shape_str(s.dst->shape()));
  return s.dst->rows(s.row_offset, s.row_offset + local[0]);
}

}  // namespace

void load_int_expert(Backend& be, const IntCheckpointFormat& fmt, const SafetensorsCheckpoint& ckpt,
                     const WeightSpec& s) {
  const std::string module = s.name.ends_with(".weight") ? s.name.substr(0, s.name.size() - 7) : s.name;
  const int64_t K = s.shape[1];
  const IntLayerReader r(fmt, ckpt, module, s.shape[0], K);
  Tensor dst = dst_rows(s);
  const int64_t rows = dst.size(0), cols = dst.size(1), G = r.group();
  const int64_t r0 = s.shard_dim == 0 ? s.shard_rank * rows : 0, c0 = s.shard_dim == 1 ? s.shard_rank * cols : 0;
  // Act order: column j of the sorted codes is input column perm[j] (groups contiguous).
  std::vector<int32_t> perm;
  if (std::vector<int32_t> g = r.g_idx(); !g.empty()) perm = int_act_order_perm(g, G, "'" + r.codes_name() + "'");
  std::vector<float> out(size_t(rows * cols));
  for_row_chunks(rows, K, [&](int64_t a, int64_t b) {
    WeightScales sc;
    sc.block_n = 1;
    sc.block_k = G;
    sc.scale = Tensor::host({b - a, K / G}, DType::F32);
    sc.zero = Tensor::host({b - a, K / G}, DType::F32);
    Tensor codes = Tensor::host({b - a, K}, DType::U8);  // one a byte whatever the bits: zeros explicit
    uint8_t* c = codes.data<uint8_t>();
    r.codes(r0 + a, r0 + b, 0, K, c);
    if (!perm.empty()) {
      std::vector<uint8_t> natural(c, c + codes.nbytes());
      for (int64_t n = 0; n < b - a; ++n)
        for (int64_t j = 0; j < K; ++j) c[n * K + j] = natural[size_t(n * K + perm[size_t(j)])];
    }
    r.scales(r0 + a, r0 + b, 0, K / G, sc.scale.data<float>());
    float* z = sc.zero.data<float>();
    if (r.has_zero())
      r.zeros(r0 + a, r0 + b, 0, K / G, z);
    else
      std::fill(z, z + sc.zero.numel(), float(1 << (fmt.bits - 1)));  // the symmetric midpoint
    check_int_weight(codes, sc, s.name.c_str());
    std::vector<float> row(static_cast<size_t>(K)), natural(static_cast<size_t>(K));
    for (int64_t n = 0; n < b - a; ++n) {
      int_dequantize_row(codes, sc, n, 0, K, row.data());
      if (!perm.empty())
        for (int64_t j = 0; j < K; ++j) natural[size_t(perm[size_t(j)])] = row[size_t(j)];
      const float* v = perm.empty() ? row.data() : natural.data();
      std::copy(v + c0, v + c0 + cols, out.begin() + (a + n) * cols);
    }
  });
  be.upload(out.data(), DType::F32, dst);
}

void round_trip_int_expert(Backend& be, Quantization q, const WeightSpec& s) {
  Tensor dst = dst_rows(s);
  const int64_t rows = dst.size(0), K = dst.size(1);
  const IntWeightScheme scheme = usual_int_weight_scheme(q);
  // As the backends' quantize_weight groups a dense layer: one group a row where the size does not divide K.
  const int64_t G = K % scheme.group_size == 0 ? scheme.group_size : K;
  if (scheme.bits == 4 && K % 2 != 0)
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": MoE expert '" + s.name + "' has " +
                    std::to_string(K) + " input columns a rank, no even group size for 4-bit codes");
  std::vector<float> w = be.to_host_f32(dst);
  for_row_chunks(rows, K, [&](int64_t a, int64_t b) {
    Tensor chunk = Tensor::host({b - a, K}, DType::F32);
    std::copy(w.begin() + a * K, w.begin() + b * K, chunk.data<float>());
    Tensor codes;
    WeightScales sc;
    int_quantize_weight(chunk, scheme.bits, G, scheme.zero_points, codes, sc);
    for (int64_t n = 0; n < b - a; ++n) int_dequantize_row(codes, sc, n, 0, K, w.data() + (a + n) * K);
  });
  be.upload(w.data(), DType::F32, dst);
}

}  // namespace nanovllm
