// The tensors of one linear layer of an AWQ, GPTQ or compressed-tensors checkpoint, read as the
// logical weight W [N, K] (N outputs, K inputs) in the code space of backends/int_weights.h:
// unsigned codes, value = (code - zero) * scale, zero the midpoint 2^(bits-1) when the format is
// symmetric. What each format stores for module m (pf = 32 / bits codes per int32 word):
//   AWQ (GEMM)   m.qweight I32 [K, N/8]: word (k, c) holds column 8c + AWQ_ORDER[i] of row k in bits
//                  [4i, 4i + 4), AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7] (AutoAWQ's interleave);
//                m.qzeros I32 [K/G, N/8] packed the same way; m.scales F16 [K/G, N].
//   GPTQ         m.qweight I32 [K/pf, N]: word (r, n) holds k = r * pf + i in bits [i*bits, (i+1)*bits);
//                m.qzeros I32 [K/G, N/pf] packed along N the same way, holding z - 1 (v1, the
//                checkpoint_format "gptq") or z (gptq_v2), read only when sym is false (vLLM too:
//                symmetric checkpoints' zeros are the midpoint); m.scales F16 [K/G, N]; m.g_idx I32
//                [K] (optional) the group of every input column. G = K for group_size -1.
//   compressed-  m.weight_packed I32 [N, ceil(K/pf)] packed along K as GPTQ (the signed codes
//   tensors        stored + 2^(bits-1), i.e. our unsigned codes); m.weight_scale [N, K/G] ([N, 1]
//                channel-wise); m.weight_zero_point I32 [ceil(N/pf), K/G] packed along N (or I8
//                [N, K/G] signed, as older versions saved it) when asymmetric; m.weight_shape [2]
//                = [N, K]; m.weight_g_idx I32 [K] (actorder group, optional).
// Scales may be F16, BF16 or F32. Shapes and dtypes are checked when the layer is opened, and
// errors name the tensor and its file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/config/quantization.h"
#include "nanovllm/utils/safetensors.h"
#include "nanovllm/utils/tensor.h"

namespace nanovllm {

class IntLayerReader {
 public:
  // Throws LoadError when a tensor is missing or has the wrong dtype or shape for W [N, K].
  IntLayerReader(const IntCheckpointFormat& fmt, const SafetensorsCheckpoint& ckpt, const std::string& module,
                 int64_t N, int64_t K);
  int64_t group() const { return G_; }  // columns per group (K for one group a row)
  bool has_zero() const { return fmt_.zero_points; }
  // codes[(r - r0) * (c1 - c0) + (c - c0)] for rows [r0, r1), columns [c0, c1): one byte a code.
  void codes(int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* out) const;
  // scale (zero) [(r - r0) * (g1 - g0) + (g - g0)] for rows [r0, r1), groups [g0, g1).
  void scales(int64_t r0, int64_t r1, int64_t g0, int64_t g1, float* out) const;
  void zeros(int64_t r0, int64_t r1, int64_t g0, int64_t g1, float* out) const;
  // The group of every input column ([K]), or empty when the checkpoint has no g_idx.
  std::vector<int32_t> g_idx() const;
  // The checkpoint tensor names of this layer, the codes' first (for messages).
  const std::string& codes_name() const { return codes_->name; }

 private:
  const TensorInfo& need(const std::string& suffix, std::vector<DType> dtypes, const Shape& shape) const;
  int32_t word(const TensorInfo& t, int64_t i) const;
  IntCheckpointFormat fmt_;
  const SafetensorsCheckpoint& ckpt_;
  std::string module_;
  int64_t N_, K_, G_, pf_;
  const TensorInfo* codes_ = nullptr;
  const TensorInfo* scale_ = nullptr;
  const TensorInfo* zero_ = nullptr;
  const TensorInfo* g_idx_ = nullptr;
};

// A stable sort of the columns on their group: perm[j] is the input column whose code becomes
// column j, so that the groups are contiguous (groups of exactly G columns, in group order).
// Identity -> empty. Throws LoadError naming `what` when a group does not get exactly G columns or
// an entry is outside [0, K / G).
std::vector<int32_t> int_act_order_perm(const std::vector<int32_t>& g_idx, int64_t G, const std::string& what);

}  // namespace nanovllm
