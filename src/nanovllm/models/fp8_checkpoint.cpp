#include "nanovllm/models/fp8_checkpoint.h"

#include <map>

#include <nlohmann/json.hpp>

#include "nanovllm/backends/fp8_weights.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/int_checkpoint.h"
#include "nanovllm/models/int_config.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// The projections we quantize, by their checkpoint names (a module kept in BF16 among them is refused).
bool is_quantizable_module(const std::string& m) {
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
    const std::string s(p);
    if (m == s || m.ends_with("." + s) || m.find("." + s + ".") != std::string::npos) return true;
  }
  return m.ends_with("self_attn") || m.ends_with("mlp") || m.ends_with("layers") || m == "model";
}

}  // namespace

Quantization parse_quantization_config(const nlohmann::json& q, const std::string& where,
                                       IntCheckpointFormat& int_format) {
  auto fail = [&](const std::string& what) -> void { throw LoadError(where + " " + what); };
  if (!q.is_object()) fail("must be an object (got " + q.dump() + ")");
  auto str = [&](const char* key, const char* def) {
    auto it = q.find(key);
    if (it == q.end() || it->is_null()) {
      if (!def) fail(std::string("lacks '") + key + "'");
      return std::string(def ? def : "");
    }
    if (!it->is_string()) fail(std::string("'") + key + "' must be a string (got " + it->dump() + ")");
    return it->get<std::string>();
  };
  const std::string method = str("quant_method", nullptr);
  if (is_int_quant_method(method)) {
    int_format = parse_int_quantization_config(q, where);
    return int_format.float8 ? Quantization::FP8 : int_format.method;
  }
  if (method != "fp8")
    fail("has quant_method '" + method +
         "': quantized checkpoints are not implemented except fine-grained FP8 (quant_method fp8), awq, gptq "
         "and compressed-tensors");
  for (const auto& [key, v] : q.items())
    if (key != "quant_method" && key != "fmt" && key != "weight_block_size" && key != "activation_scheme" &&
        key != "modules_to_not_convert" && key != "ignored_layers" && key != "dequantize" &&
        key != "modules_to_convert" && key != "scale_fmt")
      fail("has '" + key + "' (" + v.dump() + "), which is not implemented for FP8 checkpoints");
  // transformers 5 saves modules_to_convert (null: every linear layer, the only choice implemented)
  // and scale_fmt ("float": F32 weight_scale_inv tensors).
  if (auto m = q.find("modules_to_convert"); m != q.end() && !m->is_null())
    fail("has modules_to_convert " + m->dump() +
         ": converting only some modules is not implemented (null: every linear layer)");
  if (const std::string sf = str("scale_fmt", "float"); sf != "float")
    fail("has scale_fmt '" + sf + "': only float (F32) weight_scale_inv tensors are implemented");
  // transformers' FineGrainedFP8Config saves its load-time option: dequantize to BF16 on load.
  if (auto d = q.find("dequantize"); d != q.end() && !d->is_null() && *d != false)
    fail("has dequantize " + d->dump() + ": loading an FP8 checkpoint as BF16 is not implemented (set it false)");
  if (const std::string fmt = str("fmt", "e4m3"); fmt != "e4m3")
    fail("has fmt '" + fmt + "': only e4m3 FP8 weights are implemented");
  if (const std::string act = str("activation_scheme", "dynamic"); act != "dynamic")
    fail("has activation_scheme '" + act + "': only dynamic activation scales are implemented (no input_scale)");
  auto bs = q.find("weight_block_size");
  if (bs == q.end() || bs->is_null())
    fail("lacks weight_block_size: per-tensor FP8 checkpoints are not implemented (only 128 x 128 block scales)");
  if (*bs != nlohmann::json::array({kFp8BlockSize, kFp8BlockSize}))
    fail("has weight_block_size " + bs->dump() + ": only [128, 128] is implemented");
  for (const char* key : {"modules_to_not_convert", "ignored_layers"}) {
    auto it = q.find(key);
    if (it == q.end() || it->is_null()) continue;
    if (!it->is_array()) fail(std::string("'") + key + "' must be a list of module names (got " + it->dump() + ")");
    for (const auto& m : *it) {
      if (!m.is_string()) fail(std::string("'") + key + "' must be a list of module names (got " + m.dump() + ")");
      if (is_quantizable_module(m.get<std::string>()))
        fail(std::string("'") + key + "' keeps " + m.dump() +
             " unquantized: BF16 projections in an FP8 checkpoint are not implemented");
    }
  }
  return Quantization::FP8;
}

Quantization resolve_quantization(Quantization flag, Quantization checkpoint) {
  if (checkpoint == Quantization::None) return flag;
  if (flag != Quantization::None && flag != checkpoint)
    throw UserError(std::string("--quantization ") + quantization_name(flag) + ": the checkpoint is already " +
                    quantization_name(checkpoint) + " (use none or " + quantization_name(checkpoint) + ")");
  return checkpoint;
}

WeightSpec fp8_scale_spec(const WeightSpec& w, Tensor* scale) {
  const int64_t B = kFp8BlockSize;
  if (w.shape.size() != 2 || !w.name.ends_with(".weight"))
    throw LoadError("FP8 checkpoint: '" + w.name + "' is not a 2-D weight");
  const Shape local = w.local_shape();
  const std::string name = w.name + "_scale_inv";
  if (w.row_offset % B != 0)
    throw LoadError("FP8 checkpoint: '" + w.name + "' is packed at row " + std::to_string(w.row_offset) +
                    " of its projection, not on a 128-row block boundary (the parts before it must be whole blocks)");
  if (w.shard_dim >= 0 && w.num_shards > 1 && local[size_t(w.shard_dim)] % B != 0)
    throw LoadError("FP8 checkpoint: '" + w.name + "' " + shape_str(w.shape) + " split in " +
                    std::to_string(w.num_shards) + " along dimension " + std::to_string(w.shard_dim) + " gives " +
                    std::to_string(local[size_t(w.shard_dim)]) +
                    ", not a multiple of the 128 x 128 scale blocks (use another tensor-parallel size)");
  WeightSpec s = w;
  s.name = name;
  s.shape = {(w.shape[0] + B - 1) / B, (w.shape[1] + B - 1) / B};
  s.dst = scale;
  s.row_offset = w.row_offset / B;
  return s;
}

void add_fp8_checkpoint_specs(Backend& be, CausalLM& model, const std::string& architecture,
                              std::vector<WeightSpec>& specs) {
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty() || !model.moe_expert_weights().empty())
    throw UserError("FP8 checkpoints: not implemented for " + architecture);
  std::map<const Tensor*, Linear*> by_weight;
  for (Linear* l : linears) {
    const int64_t N = l->weight.size(0), K = l->weight.size(1), B = kFp8BlockSize;
    l->weight = be.empty({N, K}, DType::F8E4M3);
    l->weight_scales = WeightScales{be.empty({(N + B - 1) / B, (K + B - 1) / B}, DType::F32), B, B};
    by_weight[&l->weight] = l;
  }
  const size_t n = specs.size();
  for (size_t i = 0; i < n; ++i)
    if (auto it = by_weight.find(specs[i].dst); it != by_weight.end())
      specs.push_back(fp8_scale_spec(specs[i], &it->second->weight_scales.scale));
}

void add_float8_checkpoint_specs(Backend& be, CausalLM& model, const IntCheckpointFormat& fmt,
                                 const std::string& architecture, std::vector<WeightSpec>& specs) {
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty() || !model.moe_expert_weights().empty())
    throw UserError("FP8 checkpoints: not implemented for " + architecture);
  std::map<const Tensor*, Linear*> by_weight;
  for (Linear* l : linears) by_weight[&l->weight] = l;
  const size_t n = specs.size();
  for (size_t i = 0; i < n; ++i) {
    auto it = by_weight.find(specs[i].dst);
    if (it == by_weight.end()) continue;
    const std::string module = specs[i].name.substr(0, specs[i].name.size() - 7);  // "<module>.weight"
    if (!int_format_quantizes(fmt, module)) continue;                              // ignored: loads unquantized
    Linear* l = it->second;
    if (l->weight.dtype() != DType::F8E4M3) {
      const int64_t N = l->weight.size(0), K = l->weight.size(1);
      l->weight = be.empty({N, K}, DType::F8E4M3);
      l->weight_scales = WeightScales{be.empty({N, 1}, DType::F32), 1, 0};
    }
    WeightSpec s = specs[i];  // weight_scale [N, 1]: the rows of a column-parallel slice, whole otherwise
    s.name = module + ".weight_scale";
    s.shape = {specs[i].shape[0], 1};
    s.dst = &l->weight_scales.scale;
    if (s.shard_dim == 1) s.shard_dim = -1, s.num_shards = 1, s.shard_rank = 0;
    specs.push_back(s);
  }
}

}  // namespace nanovllm
