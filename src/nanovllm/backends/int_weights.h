// Group-quantized integer weights (W4A16 / W8A16): the one representation the engine keeps for
// AWQ, GPTQ and compressed-tensors pack-quantized checkpoints (models/ reads each format into it),
// and the host reference of what every backend's linear computes with them.
//
// Canonical layout (what the loaders write; Backend::prepare_int_weight may re-layout afterwards):
//   codes  U4 [N, K] (two per byte, row-major, the even k in the low nibble) or U8 [N, K], unsigned
//   scale  F32 [N, K / G]      G = WeightScales::block_k, the group size (K: one group per row,
//                              i.e. channel-wise); block_n is 1
//   zero   F32 [N, K / G]      zero points in code units (AWQ's and GPTQ's integer qzeros); undefined:
//                              symmetric, the midpoint 8 (U4) or 128 (U8)
//   perm   I32 [K] or none     act order (GPTQ desc_act): groups are made contiguous at load by
//                              sorting the columns on g_idx, and column k of codes then multiplies
//                              input column perm[k]
// Semantics (the one definition every backend implements, F32 accumulation):
//   value[n][k] = (code[n][k] - zero[n][k / G]) * scale[n][k / G]
//   out[t][n]   = sum_k x[t][perm[k]] * value[n][k]       (perm the identity when undefined)
// Activations are not quantized. K must be a multiple of G, G even (U4).
#pragma once
#include <cstdint>

#include "nanovllm/backends/weight_scales.h"

namespace nanovllm {

// The code of a symmetric format's zero: 2^(bits - 1).
inline float int_weight_midpoint(DType codes) { return codes == DType::U4 ? 8.0f : 128.0f; }

// Checks codes (U4 or U8, [N, K]) against its scales in the canonical layout above (shapes,
// dtypes, K % G == 0, perm's length); throws Error naming `what`, the field and the shapes.
void check_int_weight(const Tensor& codes, const WeightScales& scales, const char* what);

// value[n][k0..k1) of host codes in the canonical layout -> out[0..k1 - k0) (k in the codes' column
// order, i.e. before perm).
void int_dequantize_row(const Tensor& codes, const WeightScales& scales, int64_t n, int64_t k0, int64_t k1, float* out);

// Quantizes w [N, K] (host F32) in groups of G columns (group <= 0: one group per row) into the
// canonical layout, as checkpoint makers do (codes round half to even, clamped to [0, 2^bits - 1]):
//   zero points (AutoAWQ): scale = (max - min) / (2^bits - 1), zero = round(-min / scale);
//   symmetric (GPTQ sym): scale = 2 amax / (2^bits - 1), zero = the midpoint (left undefined).
// A constant group gets scale 1 (zero points) or an all-zero one scale 1 (symmetric).
// bits 4 -> U4 codes, 8 -> U8; throws Error for other bits or a group that does not fit K.
void int_quantize_weight(const Tensor& w, int bits, int64_t group, bool zero_points, Tensor& codes,
                         WeightScales& scales);

}  // namespace nanovllm
