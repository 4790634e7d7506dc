// AWQ, GPTQ and compressed-tensors quantization_config -> IntCheckpointFormat (int_config.h).
// Fields a format may carry that do not change what the tensors mean (AutoGPTQ's damp_percent,
// true_sequential, AutoAWQ's backend, compressed-tensors' observer, ...) are ignored; a field that
// would change it is either implemented or refused naming it.
#include "nanovllm/models/int_config.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

using json = nlohmann::json;

struct Fields {
  const json& q;
  const std::string& where;

  [[noreturn]] void fail(const std::string& what) const { throw LoadError(where + " " + what); }
  const json* find(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (auto it = q.find(k); it != q.end() && !it->is_null()) return &*it;
    return nullptr;
  }
  static constexpr int64_t kRequired = INT64_MIN;
  int64_t integer(std::initializer_list<const char*> keys, int64_t def) const {
    const json* v = find(keys);
    if (!v && def == kRequired) fail("lacks '" + std::string(*keys.begin()) + "'");
    if (!v) return def;
    if (!v->is_number_integer())
      fail("'" + std::string(*keys.begin()) + "' must be an integer (got " + v->dump() + ")");
    return v->get<int64_t>();
  }
  bool boolean(std::initializer_list<const char*> keys, bool def) const {
    const json* v = find(keys);
    if (!v) return def;
    if (!v->is_boolean()) fail("'" + std::string(*keys.begin()) + "' must be true or false (got " + v->dump() + ")");
    return v->get<bool>();
  }
  std::string string(std::initializer_list<const char*> keys, const std::string& def) const {
    const json* v = find(keys);
    if (!v) return def;
    if (!v->is_string()) fail("'" + std::string(*keys.begin()) + "' must be a string (got " + v->dump() + ")");
    return v->get<std::string>();
  }
  std::vector<std::string> strings(const char* key) const {
    const json* v = find({key});
    std::vector<std::string> out;
    if (!v) return out;
    if (!v->is_array()) fail(std::string("'") + key + "' must be a list of module names (got " + v->dump() + ")");
    for (const json& m : *v) {
      if (!m.is_string()) fail(std::string("'") + key + "' must be a list of module names (got " + m.dump() + ")");
      out.push_back(m.get<std::string>());
    }
    return out;
  }
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

void check_group(const Fields& f, int64_t g, bool allow_row) {
  if (g == -1 && allow_row) return;
  if (g < 2 || g % 2 != 0)
    f.fail("has group_size " + std::to_string(g) + ": an even group of at least 2 columns" +
           (allow_row ? " or -1 (one group per row)" : "") + " is implemented");
}

IntCheckpointFormat parse_awq(const Fields& f) {
  IntCheckpointFormat fmt;
  fmt.method = Quantization::AWQ;
  fmt.bits = int(f.integer({"bits", "w_bit"}, Fields::kRequired));
  if (fmt.bits != 4) f.fail("has bits " + std::to_string(fmt.bits) + ": AWQ checkpoints of 4 bits are implemented");
  fmt.group_size = f.integer({"group_size", "q_group_size"}, Fields::kRequired);
  check_group(f, fmt.group_size, false);
  if (!f.boolean({"zero_point"}, true))
    f.fail("has zero_point false: AWQ checkpoints with zero points are implemented");
  fmt.zero_points = true;
  if (const std::string v = lower(f.string({"version"}, "gemm")); v != "gemm")
    f.fail("has version '" + v + "': AWQ's GEMM packing (version gemm) is implemented, not gemv, marlin or exllama");
  fmt.unconverted = f.strings("modules_to_not_convert");
  fmt.unconverted_substrings = true;
  return fmt;
}

IntCheckpointFormat parse_gptq(const Fields& f) {
  IntCheckpointFormat fmt;
  fmt.method = Quantization::GPTQ;
  fmt.bits = int(f.integer({"bits"}, Fields::kRequired));
  if (fmt.bits != 4 && fmt.bits != 8)
    f.fail("has bits " + std::to_string(fmt.bits) + ": GPTQ checkpoints of 4 or 8 bits are implemented");
  fmt.group_size = f.integer({"group_size"}, Fields::kRequired);
  check_group(f, fmt.group_size, true);
  fmt.zero_points = !f.boolean({"sym"}, true);
  // desc_act only says whether g_idx reorders the groups; the g_idx tensors themselves are read.
  (void)f.boolean({"desc_act"}, false);
  const std::string cf = lower(f.string({"checkpoint_format", "format"}, "gptq"));
  if (cf != "gptq" && cf != "gptq_v2")
    f.fail("has checkpoint_format '" + cf + "': GPTQ's gptq (v1) and gptq_v2 packings are implemented");
  fmt.gptq_v2 = cf == "gptq_v2";
  if (const std::string pd = f.string({"pack_dtype"}, "int32"); pd != "int32" && pd != "torch.int32")
    f.fail("has pack_dtype '" + pd + "': int32 packing is implemented");
  if (f.boolean({"lm_head"}, false)) f.fail("has lm_head true: a quantized LM head is not implemented");
  if (const json* d = f.find({"dynamic"}); d && !(d->is_object() && d->empty()))
    f.fail("has dynamic " + d->dump() + ": per-module GPTQ settings are not implemented");
  if (const json* m = f.find({"modules_in_block_to_quantize"}))
    f.fail("has modules_in_block_to_quantize " + m->dump() + ": quantizing only some modules is not implemented");
  return fmt;
}

// One config group's weights of a pack-quantized checkpoint -> bits, group, zero points.
IntWeightScheme ct_weights(const Fields& group, const std::string& name) {
  const json* w = group.find({"weights"});
  if (!w || !w->is_object()) group.fail("config_groups." + name + " lacks 'weights'");
  const Fields f{*w, group.where + " config_groups." + name + ".weights"};
  if (const std::string t = f.string({"type"}, "int"); t != "int")
    f.fail("has type '" + t + "': integer weights (W4A16 / W8A16) of format pack-quantized are implemented");
  IntWeightScheme s;
  s.bits = int(f.integer({"num_bits"}, 0));
  if (s.bits != 4 && s.bits != 8) f.fail("has num_bits " + std::to_string(s.bits) + ": 4 and 8 are implemented");
  const std::string strategy = f.string({"strategy"}, "");
  if (strategy == "group") {
    s.group_size = f.integer({"group_size"}, 0);
    check_group(f, s.group_size, false);
  } else if (strategy == "channel") {
    s.group_size = -1;
  } else {
    f.fail("has strategy '" + strategy + "': group and channel are implemented");
  }
  s.zero_points = !f.boolean({"symmetric"}, true);
  if (f.boolean({"dynamic"}, false)) f.fail("has dynamic true: dynamic weight quantization is not implemented");
  if (const json* b = f.find({"block_structure"})) f.fail("has block_structure " + b->dump() + ": not implemented");
  if (const std::string a = f.string({"actorder"}, "group"); a != "group" && a != "weight")
    f.fail("has actorder '" + a + "': null, group and weight are implemented");
  return s;
}

// float-quantized (FP8 W8A8 with dynamic per-token activations, per-channel weight scales): the
// group's weights and activations checked; the format then runs as our fp8.
void ct_float8(const Fields& group, const std::string& name) {
  const json* w = group.find({"weights"});
  if (!w || !w->is_object()) group.fail("config_groups." + name + " lacks 'weights'");
  const Fields f{*w, group.where + " config_groups." + name + ".weights"};
  if (f.string({"type"}, "") != "float" || f.integer({"num_bits"}, 0) != 8 || !f.boolean({"symmetric"}, true))
    f.fail("is " + w->dump() + ": float-quantized weights of type float, num_bits 8, symmetric are implemented");
  if (const std::string st = f.string({"strategy"}, ""); st != "channel")
    f.fail("has strategy '" + st + "': float-quantized weights with per-channel scales are implemented");
  if (const json* a = group.find({"input_activations"})) {
    const Fields af{*a, group.where + " config_groups." + name + ".input_activations"};
    if (!a->is_object() || !af.boolean({"dynamic"}, false) || af.string({"strategy"}, "") != "token" ||
        af.string({"type"}, "") != "float" || af.integer({"num_bits"}, 0) != 8)
      af.fail("is " + a->dump() + ": dynamic per-token FP8 activations are implemented (no static input_scale)");
  }
  if (const json* o = group.find({"output_activations"}))
    group.fail("config_groups." + name + " has output_activations " + o->dump() + ": not implemented");
}

IntCheckpointFormat parse_compressed_tensors(const Fields& f) {
  IntCheckpointFormat fmt;
  fmt.method = Quantization::CompressedTensors;
  const std::string top = f.string({"format"}, "");
  const json* groups = f.find({"config_groups"});
  if (!groups || !groups->is_object() || groups->empty())
    f.fail("lacks config_groups: a compressed-tensors checkpoint without quantized weights is not implemented");
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) f.fail("config_groups." + name + " must be an object (got " + g.dump() + ")");
    const Fields gf{g, f.where};
    const std::string format = gf.string({"format"}, top);
    if (format == "float-quantized" && (first || fmt.float8)) {
      ct_float8(gf, name);
      fmt.float8 = true, fmt.bits = 8, fmt.group_size = -1, first = false;
    } else if (fmt.float8) {
      f.fail("config_groups." + name + " has format '" + format +
             "' beside float-quantized groups: one format is "
             "implemented");
    }
    if (fmt.float8) {
      const std::vector<std::string> t = Fields{g, f.where + " config_groups." + name}.strings("targets");
      fmt.targets.insert(fmt.targets.end(), t.begin(), t.end());
      continue;
    }
    if (format != "pack-quantized")
      f.fail("config_groups." + name + " has format '" + format +
             "': pack-quantized integer weights (W4A16 / W8A16) and float-quantized FP8 are implemented, not "
             "int-quantized, naive-quantized or others");
    for (const char* act : {"input_activations", "output_activations"})
      if (const json* a = gf.find({act}))
        f.fail("config_groups." + name + " has " + act + " " + a->dump() +
               ": activation quantization is not implemented for integer weights (W4A16 / W8A16 only)");
    const IntWeightScheme s = ct_weights(gf, name);
    if (!first && (s.bits != fmt.bits || s.group_size != fmt.group_size || s.zero_points != fmt.zero_points))
      f.fail("config_groups." + name +
             " differs from the other groups' weights: one scheme for every layer is "
             "implemented");
    first = false;
    fmt.bits = s.bits, fmt.group_size = s.group_size, fmt.zero_points = s.zero_points;
    const std::vector<std::string> t = Fields{g, f.where + " config_groups." + name}.strings("targets");
    if (t.empty()) f.fail("config_groups." + name + " lacks targets");
    fmt.targets.insert(fmt.targets.end(), t.begin(), t.end());
  }
  fmt.unconverted = f.strings("ignore");
  if (const json* kv = f.find({"kv_cache_scheme"}))
    f.fail("has kv_cache_scheme " + kv->dump() + ": checkpoint KV-cache quantization is not implemented");
  if (const json* sp = f.find({"sparsity_config"}); sp && !(sp->is_object() && sp->empty()))
    f.fail("has sparsity_config " + sp->dump() + ": sparse checkpoints are not implemented");
  if (const json* tc = f.find({"transform_config"}))
    f.fail("has transform_config " + tc->dump() + ": transformed weights are not implemented");
  if (const std::string st = f.string({"quantization_status"}, "compressed"); st != "compressed")
    f.fail("has quantization_status '" + st + "': compressed checkpoints are implemented");
  return fmt;
}

}  // namespace

bool is_int_quant_method(const std::string& method) {
  return method == "awq" || method == "gptq" || method == "compressed-tensors";
}

IntCheckpointFormat parse_int_quantization_config(const nlohmann::json& q, const std::string& where) {
  const Fields f{q, where};
  if (!q.is_object()) f.fail("must be an object (got " + q.dump() + ")");
  const std::string method = f.string({"quant_method"}, "");
  if (method == "awq") return parse_awq(f);
  if (method == "gptq") return parse_gptq(f);
  if (method == "compressed-tensors") return parse_compressed_tensors(f);
  f.fail("has quant_method '" + method + "', not awq, gptq or compressed-tensors");
}

IntCheckpointFormat parse_quantize_config_file(const nlohmann::json& q, const std::string& where) {
  const Fields f{q, where};
  if (!q.is_object()) f.fail("must be an object (got " + q.dump() + ")");
  if (f.find({"quant_method"})) return parse_int_quantization_config(q, where);
  return f.find({"w_bit", "version"}) ? parse_awq(f) : parse_gptq(f);
}

}  // namespace nanovllm
