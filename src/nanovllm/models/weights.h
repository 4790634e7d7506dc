// Declarative weight loading (nano-vllm's weight_loader + packed_modules_mapping): each
// WeightSpec names a checkpoint tensor, its expected shape, and the rows of the destination
// parameter it fills. q/k/v fill consecutive row ranges of qkv_proj, gate/up of gate_up_proj.
// Tensor parallelism: a spec may take only shard `shard_rank` of `num_shards` equal slices of
// the checkpoint tensor along `shard_dim` (0: rows, e.g. q_proj of a column-parallel layer;
// 1: columns, e.g. o_proj of a row-parallel one). Only that slice is read from the mmapped file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"

namespace nanovllm {

class SafetensorsCheckpoint;

struct WeightSpec {
  std::string name;        // checkpoint tensor name, e.g. model.layers.0.self_attn.q_proj.weight
  Shape shape;             // expected checkpoint shape
  Tensor* dst;             // destination parameter
  int64_t row_offset = 0;  // first row of dst this tensor fills
  bool optional = false;   // e.g. lm_head.weight when embeddings are tied
  int shard_dim = -1;      // -1: the whole tensor; 0: a slice of rows; 1: a slice of columns
  int64_t shard_rank = 0, num_shards = 1;

  // The shape of what this spec loads: `shape` with shard_dim divided by num_shards.
  Shape local_shape() const;
};

// Called after each spec's tensor is in place (quantize-at-load: models/quantize_weights.h).
using WeightLoaded = std::function<void(const WeightSpec&)>;

// Loads every spec from the checkpoint (dtype converted to the backend's weight dtype).
// Throws LoadError naming the missing tensor or the shape mismatch.
void load_weights(Backend& be, const SafetensorsCheckpoint& ckpt, const std::vector<WeightSpec>& specs,
                  const WeightLoaded& loaded = {});

// Deterministic random weights (--load-format dummy): norms (1-D weights) get 1.0, biases 0, matrices
// uniform values with std 0.02, each tensor seeded by its name and each value by its index in
// the full tensor, so that a shard holds exactly the full tensor's slice (TP=N equals TP=1).
void load_dummy_weights(Backend& be, const std::vector<WeightSpec>& specs, const WeightLoaded& loaded = {});

}  // namespace nanovllm
