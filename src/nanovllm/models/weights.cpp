#include "nanovllm/models/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <vector>

#include "nanovllm/models/dummy_fill.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

static int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape WeightSpec::local_shape() const {
  Shape s = shape;
  if (shard_dim >= 0) {
    if (size_t(shard_dim) >= s.size() || num_shards <= 0 || s[size_t(shard_dim)] % num_shards != 0)
      throw LoadError("tensor '" + name + "' of shape " + shape_str(shape) + " cannot be split in " +
                      std::to_string(num_shards) + " along dimension " + std::to_string(shard_dim));
    s[size_t(shard_dim)] /= num_shards;
  }
  return s;
}

// The rows [row_offset, row_offset + local rows) of dst as a tensor view.
static Tensor dst_view(const WeightSpec& s) {
  const Shape local = s.local_shape();
  const int64_t rows = local.empty() ? 1 : local[0];  // of a 1-D dst (a packed bias): elements
  return s.dst->rows(s.row_offset, s.row_offset + rows);
}

void load_weights(Backend& be, const SafetensorsCheckpoint& ckpt, const std::vector<WeightSpec>& specs,
                  const WeightLoaded& loaded) {
  std::vector<uint8_t> cols;  // host staging for column slices
  for (const auto& s : specs) {
    const TensorInfo* t = ckpt.find(s.name);
    if (!t) {
      if (s.optional) continue;
      throw LoadError("missing tensor '" + s.name + "' (expected shape " + shape_str(s.shape) + ") in the checkpoint");
    }
    if (t->shape != s.shape)
      throw LoadError(t->file + ": tensor '" + s.name + "' has shape " + shape_str(t->shape) +
                      " but the config implies " + shape_str(s.shape));
    if ((t->dtype == DType::F8E4M3) != (s.dst->dtype() == DType::F8E4M3))  // FP8 checkpoints' codes
      throw LoadError(t->file + ": tensor '" + s.name + "' has dtype " + dtype_name(t->dtype) + " where " +
                      (t->dtype == DType::F8E4M3 ? "an unquantized weight (F32, BF16 or F16)" : "F8_E4M3 codes") +
                      " belong (config.json's quantization_config)");
    if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F8E4M3)
      throw LoadError(t->file + ": tensor '" + s.name + "' has dtype " + dtype_name(t->dtype) +
                      "; weights must be F32, BF16 or F16");
    Tensor view = dst_view(s);
    const Shape local = s.local_shape();
    if (view.numel() != numel_of(local)) throw LoadError("tensor '" + s.name + "' does not fit its parameter");
    const size_t es = dtype_size(t->dtype);
    const char* src = static_cast<const char*>(t->data);
    if (s.shard_dim == 0) {  // rows [rank * r, (rank + 1) * r): a pointer offset into the mmap
      src += size_t(s.shard_rank * numel_of(local)) * es;
    } else if (s.shard_dim == 1) {  // columns [rank * c, (rank + 1) * c) of every row: a strided copy
      const int64_t rows = local[0], c = local[1], full = s.shape[1];
      cols.resize(size_t(rows * c) * es);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(cols.data() + size_t(r * c) * es, src + size_t(r * full + s.shard_rank * c) * es, size_t(c) * es);
      src = reinterpret_cast<const char*>(cols.data());
    }
    be.upload(src, t->dtype, view);
    if (loaded) loaded(s);
  }
}

void load_dummy_weights(Backend& be, const std::vector<WeightSpec>& specs, const WeightLoaded& loaded) {
  const bool cpu = be.device() == Device::CPU;
  for (const auto& s : specs) {
    if (s.optional) continue;
    Tensor view = dst_view(s);
    uint64_t seed = 1469598103934665603ull;
    for (char c : s.name) seed = (seed ^ uint8_t(c)) * 1099511628211ull;
    const float a = 0.02f * std::sqrt(3.0f);  // uniform(-a, a) has std 0.02
    // Fill and upload in chunks of rows, so no full-size host copy is needed. Element (r, c) of
    // the local slice is element (r + row0, c + col0) of the full tensor, whose index seeds it.
    const Shape local = s.local_shape();
    const int64_t rows = local.size() == 1 ? 1 : local[0], cols = numel_of(local) / rows;
    if (local.size() == 1) {  // norm weights 1, biases 0
      std::vector<float> host(size_t(cols), s.name.ends_with(".bias") ? 0.0f : 1.0f);
      be.upload(host.data(), DType::F32, view);
      if (loaded) loaded(s);
      continue;
    }
    const int64_t full_cols = numel_of(s.shape) / s.shape[0];
    const int64_t row0 = s.shard_dim == 0 ? s.shard_rank * rows : 0, col0 = s.shard_dim == 1 ? s.shard_rank * cols : 0;
    auto fill = [&](int64_t r0, int64_t r1, float* host) {
      for (int64_t r = r0; r < r1; ++r)
        fill_uniform(seed, uint64_t((row0 + r) * full_cols + col0), cols, a, host + (r - r0) * cols);
    };
    // On the CPU 2^17 floats a chunk (512 KiB): each thread fills and uploads (rounds to BF16,
    // first-touching the weight's pages) its own chunks while they are in cache, taken one at a
    // time so a thread that shares its core (the tokenizer loads meanwhile) does less; one barrier
    // a tensor. To a GPU 2^22 (16 MiB) a chunk, filled by all threads, fewer copies.
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << (cpu ? 17 : 22)) / cols);
    const int64_t num_chunks = (rows + chunk - 1) / chunk;
    if (cpu) {
      std::exception_ptr error;  // an exception must not leave the parallel region
#pragma omp parallel
      {
        std::vector<float> host(size_t(std::min(rows, chunk) * cols));
#pragma omp for schedule(dynamic)
        for (int64_t i = 0; i < num_chunks; ++i) {
          const int64_t r0 = i * chunk, r1 = std::min(rows, r0 + chunk);
          try {
            fill(r0, r1, host.data());
            Tensor part = view.rows(r0, r1);
            be.upload(host.data(), DType::F32, part);
          } catch (...) {
#pragma omp critical(nanovllm_dummy_fill)
            if (!error) error = std::current_exception();
          }
        }
      }
      if (error) std::rethrow_exception(error);
    } else {
      std::vector<float> host(size_t(std::min(rows, chunk) * cols));
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r1 = std::min(rows, r0 + chunk);
#pragma omp parallel for
        for (int64_t r = r0; r < r1; ++r) fill(r, r + 1, host.data() + (r - r0) * cols);
        Tensor part = view.rows(r0, r1);
        be.upload(host.data(), DType::F32, part);
      }
    }
    if (loaded) loaded(s);
  }
}

}  // namespace nanovllm
