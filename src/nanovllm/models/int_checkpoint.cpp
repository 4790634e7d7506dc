// AWQ / GPTQ / compressed-tensors layers -> the canonical U4/U8 layout, one part (q, k, v, ...) at
// a time, this rank's slice only (int_checkpoint.h).
#include "nanovllm/models/int_checkpoint.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>

#include "nanovllm/backends/int_weights.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/int_experts.h"
#include "nanovllm/models/int_formats.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

namespace {

std::string module_of(const std::string& weight_name) {
  return weight_name.ends_with(".weight") ? weight_name.substr(0, weight_name.size() - 7) : weight_name;
}

bool pattern_matches(const std::string& pattern, const std::string& name) {
  if (!pattern.starts_with("re:")) return pattern == name;
  try {
    return std::regex_search(name, std::regex(pattern.substr(3)), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw LoadError("quantization_config: '" + pattern + "' is not a valid regular expression (" + e.what() + ")");
  }
}

// What one layer of the model becomes, filled part by part.
struct IntLayer {
  Linear* linear = nullptr;
  std::vector<WeightSpec> parts;
  size_t loaded = 0;
  Tensor codes;
  WeightScales scales;
  std::optional<std::vector<int32_t>> perm;  // the first part's (empty vector: identity)
};

// Which of this part's columns and groups the rank holds: [c0, c0 + cols) of K, groups of `group`
// columns (the local group: the checkpoint's, or the slice itself when it lies inside one group).
struct Slice {
  int64_t r0, rows, c0, cols, group, g0, groups;
};

Slice slice_of(const WeightSpec& s, int64_t G) {
  const Shape local = s.local_shape();
  Slice sl{s.shard_dim == 0 ? s.shard_rank * local[0] : 0,
           local[0],
           s.shard_dim == 1 ? s.shard_rank * local[1] : 0,
           local[1],
           G,
           0,
           0};
  if (sl.cols % G != 0) {
    if (G % sl.cols != 0)
      throw LoadError("'" + s.name + "' " + shape_str(s.shape) + " split in " + std::to_string(s.num_shards) +
                      " along its input columns gives " + std::to_string(sl.cols) +
                      " columns a rank, which cut its groups of " + std::to_string(G) +
                      " (use a tensor-parallel size that keeps whole groups)");
    sl.group = sl.cols;  // inside one group: one scale a row
  }
  sl.g0 = sl.c0 / G;
  sl.groups = sl.cols / sl.group;
  return sl;
}

// The name an expert's projection is matched under: AWQ's substrings against the experts' prefix
// ("model.layers.0.mlp.experts", as vLLM's fused MoE layer matches them), so that the usual
// modules_to_not_convert ["gate"] (the router) leaves the experts' gate_proj quantized; the other
// formats' names and regexes against the projection's own name.
std::string expert_rule_name(const IntCheckpointFormat& fmt, const std::string& module) {
  const size_t e = module.rfind(".experts.");
  return fmt.unconverted_substrings && e != std::string::npos ? module.substr(0, e + 8) : module;
}

void pack_codes(const std::vector<uint8_t>& codes, DType d, std::vector<uint8_t>& out) {
  if (d == DType::U8) {
    out = codes;
    return;
  }
  out.assign((codes.size() + 1) / 2, 0);
  for (size_t i = 0; i < codes.size(); ++i) out[i / 2] |= uint8_t(codes[i] << (4 * (i % 2)));
}

void upload_rows(Backend& be, const void* src, DType d, Tensor& dst, int64_t r0, int64_t rows) {
  Tensor view = dst.rows(r0, r0 + rows);
  be.upload(src, d, view);
}

void load_part(Backend& be, const IntCheckpointFormat& fmt, const SafetensorsCheckpoint& ckpt, IntLayer& layer,
               const WeightSpec& s) {
  const std::string module = module_of(s.name);
  const IntLayerReader r(fmt, ckpt, module, s.shape[0], s.shape[1]);
  const Slice sl = slice_of(s, r.group());
  const DType d = fmt.bits == 4 ? DType::U4 : DType::U8;
  if (d == DType::U4 && sl.cols % 2 != 0)
    throw LoadError("'" + s.name + "': " + std::to_string(sl.cols) + " input columns a rank, not even (4-bit codes)");
  Linear& l = *layer.linear;
  if (!layer.codes.defined()) {  // the first part: the layer's tensors
    const int64_t N = l.weight.size(0), K = l.weight.size(1);
    layer.codes = be.empty({N, K}, d);
    layer.scales.block_n = 1;
    layer.scales.block_k = sl.group;
    layer.scales.scale = be.empty({N, K / sl.group}, DType::F32);
    if (r.has_zero()) layer.scales.zero = be.empty({N, K / sl.group}, DType::F32);
  }
  if (layer.scales.block_k != sl.group || layer.codes.size(1) != sl.cols)
    throw LoadError("'" + s.name + "': its groups of " + std::to_string(sl.group) + " differ from the other parts of " +
                    "its layer (" + std::to_string(layer.scales.block_k) + ")");
  // Act order: the columns sorted on g_idx (the same for every part of the layer).
  std::vector<int32_t> perm;
  if (std::vector<int32_t> g = r.g_idx(); !g.empty())
    perm = int_act_order_perm(g, r.group(), "'" + r.codes_name() + "'");
  if (!perm.empty() && s.shard_dim == 1 && s.num_shards > 1)
    throw LoadError("'" + s.name +
                    "' has act order (g_idx reorders its groups) and is split along its input columns "
                    "by tensor parallelism: not implemented (use tensor_parallel_size 1, or a checkpoint without "
                    "desc_act / actorder)");
  if (layer.perm && *layer.perm != perm)
    throw LoadError("'" + s.name +
                    "': its g_idx differs from the other parts of its layer (one column order a layer "
                    "is implemented)");
  layer.perm = perm;
  std::vector<uint8_t> codes(size_t(sl.rows * sl.cols)), packed;
  if (perm.empty()) {
    r.codes(sl.r0, sl.r0 + sl.rows, sl.c0, sl.c0 + sl.cols, codes.data());
  } else {  // whole rows (cols == K): column j takes input column perm[j]
    std::vector<uint8_t> natural(codes.size());
    r.codes(sl.r0, sl.r0 + sl.rows, 0, sl.cols, natural.data());
    for (int64_t n = 0; n < sl.rows; ++n)
      for (int64_t j = 0; j < sl.cols; ++j)
        codes[size_t(n * sl.cols + j)] = natural[size_t(n * sl.cols + perm[size_t(j)])];
  }
  pack_codes(codes, d, packed);
  upload_rows(be, packed.data(), d, layer.codes, s.row_offset, sl.rows);
  std::vector<float> f(size_t(sl.rows * sl.groups));
  r.scales(sl.r0, sl.r0 + sl.rows, sl.g0, sl.g0 + sl.groups, f.data());
  upload_rows(be, f.data(), DType::F32, layer.scales.scale, s.row_offset, sl.rows);
  if (r.has_zero()) {
    r.zeros(sl.r0, sl.r0 + sl.rows, sl.g0, sl.g0 + sl.groups, f.data());
    upload_rows(be, f.data(), DType::F32, layer.scales.zero, s.row_offset, sl.rows);
  }
}

void finish_layer(Backend& be, IntLayer& layer, const std::string& name) {
  if (layer.perm && !layer.perm->empty()) {
    layer.scales.perm = be.empty({int64_t(layer.perm->size())}, DType::I32);
    be.upload(layer.perm->data(), DType::I32, layer.scales.perm);
  }
  check_int_weight(layer.codes, layer.scales, name.c_str());
  be.prepare_int_weight(layer.codes, layer.scales);
  layer.linear->weight = layer.codes;
  layer.linear->weight_scales = layer.scales;
}

}  // namespace

bool int_format_quantizes(const IntCheckpointFormat& fmt, const std::string& name) {
  bool targeted = fmt.targets.empty();
  for (const std::string& t : fmt.targets) targeted = targeted || t == "Linear" || pattern_matches(t, name);
  if (!targeted) return false;
  for (const std::string& u : fmt.unconverted)
    if (fmt.unconverted_substrings ? name.find(u) != std::string::npos : pattern_matches(u, name)) return false;
  return true;
}

void load_int_checkpoint(Backend& be, CausalLM& model, const IntCheckpointFormat& fmt, const std::string& architecture,
                         const SafetensorsCheckpoint& ckpt, std::vector<WeightSpec>& specs) {
  const char* method = quantization_name(fmt.method);
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty())
    throw UserError(std::string("--quantization ") + method + ": not implemented for " + architecture);
  std::map<const Tensor*, IntLayer> layers;
  for (Linear* l : linears) layers[&l->weight].linear = l;
  const std::vector<const Tensor*> experts = model.moe_expert_weights();
  std::vector<WeightSpec> rest;
  std::vector<IntLayer*> order;  // the model's order, so that errors name the first layer at fault
  for (const WeightSpec& s : specs) {
    if (std::find(experts.begin(), experts.end(), s.dst) != experts.end() &&
        int_format_quantizes(fmt, expert_rule_name(fmt, module_of(s.name)))) {
      load_int_expert(be, fmt, ckpt, s);  // dequantized into the stacked experts (int_experts.h)
      continue;
    }
    auto it = layers.find(s.dst);
    if (it == layers.end()) {
      rest.push_back(s);
      continue;
    }
    if (it->second.parts.empty()) order.push_back(&it->second);
    it->second.parts.push_back(s);
  }
  for (IntLayer* lp : order) {
    IntLayer& layer = *lp;
    const std::string first = module_of(layer.parts[0].name);
    const bool quantized = int_format_quantizes(fmt, first);
    for (const WeightSpec& s : layer.parts) {
      const std::string m = module_of(s.name);
      if (int_format_quantizes(fmt, m) != quantized)
        throw LoadError("the " + std::string(method) + " checkpoint quantizes '" + (quantized ? first : m) +
                        "' but not '" + (quantized ? m : first) + "', which the model packs into one layer");
      if (!quantized && !ckpt.find(s.name))
        throw LoadError("'" + m + "' is left unquantized by the checkpoint's quantization_config (targets, ignore or " +
                        "modules_to_not_convert), but the checkpoint has no '" + s.name + "'");
    }
    if (!quantized) {
      rest.insert(rest.end(), layer.parts.begin(), layer.parts.end());
      continue;
    }
    for (const WeightSpec& s : layer.parts) load_part(be, fmt, ckpt, layer, s);
    finish_layer(be, layer, module_of(layer.parts.back().name));
  }
  // A quantized tensor where the model wants an unquantized one (the LM head, an embedding).
  for (const WeightSpec& s : rest) {
    const std::string m = module_of(s.name);
    if (ckpt.find(s.name) || (!ckpt.find(m + ".qweight") && !ckpt.find(m + ".weight_packed"))) continue;
    if (std::find(experts.begin(), experts.end(), s.dst) != experts.end())
      throw LoadError("'" + m + "' is quantized in the " + std::string(method) +
                      " checkpoint, but its quantization_config (targets, ignore or modules_to_not_convert) "
                      "leaves it unquantized");
    throw LoadError("'" + m + "' " + (m.ends_with(".mlp.gate") ? "(the MoE router) " : "") + "is quantized in the " +
                    std::string(method) +
                    " checkpoint: only the decoder's projections and MoE experts are implemented quantized "
                    "(refused, not dequantized)");
  }
  specs = std::move(rest);
}

}  // namespace nanovllm
