#include "nanovllm/engine/tp_protocol.h"

#include <type_traits>

#include <nlohmann/json.hpp>

#include "nanovllm/config/settings.h"
#include "nanovllm/dist/wire.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {
constexpr uint32_t kStepTag = 0x53544550;  // "STEP"
}

std::vector<uint8_t> encode_step(const StepInputs& in) {
  const auto& md = in.md;
  ByteWriter w;
  w.put(kStepTag);
  w.put_vec(in.input_ids);
  w.put_vec(in.positions);
  w.put_vec(in.last_rows);
  w.put<uint8_t>(md.is_prefill);
  w.put(md.num_seqs);
  w.put(md.num_tokens);
  w.put_vec(md.cu_seqlens_q);
  w.put_vec(md.cu_seqlens_k);
  w.put(md.max_seqlen_q);
  w.put(md.max_seqlen_k);
  w.put_vec(md.slot_mapping);
  w.put_vec(md.context_lens);
  w.put_vec(md.block_tables);
  w.put(md.max_blocks);
  static_assert(std::is_trivially_copyable_v<KVBlockCopy> && sizeof(KVBlockCopy) == 12);
  w.put_vec(in.kv_copies);
  return std::move(w.bytes());
}

StepInputs decode_step(const std::vector<uint8_t>& bytes) {
  ByteReader r(bytes);
  if (r.get<uint32_t>() != kStepTag) throw Error("tensor parallel: expected a step message from rank 0");
  StepInputs in;
  auto& md = in.md;
  in.input_ids = r.get_vec<int32_t>();
  in.positions = r.get_vec<int32_t>();
  in.last_rows = r.get_vec<int32_t>();
  md.is_prefill = r.get<uint8_t>() != 0;
  md.num_seqs = r.get<int64_t>();
  md.num_tokens = r.get<int64_t>();
  md.cu_seqlens_q = r.get_vec<int32_t>();
  md.cu_seqlens_k = r.get_vec<int32_t>();
  md.max_seqlen_q = r.get<int32_t>();
  md.max_seqlen_k = r.get<int32_t>();
  md.slot_mapping = r.get_vec<int32_t>();
  md.context_lens = r.get_vec<int32_t>();
  md.block_tables = r.get_vec<int32_t>();
  md.max_blocks = r.get<int64_t>();
  in.kv_copies = r.get_vec<KVBlockCopy>();
  return in;
}

static nlohmann::json model_dims(const ModelConfig& m) {
  return {{"architecture", m.architecture},
          {"vocab_size", m.vocab_size},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.num_key_value_heads},
          {"head_dim", m.head_dim},
          {"tie_word_embeddings", m.tie_word_embeddings}};
}

// A setting's value as JSON and back (the table's SettingValue).
static nlohmann::json to_json(const SettingValue& v) {
  struct {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(bool b) const { return b; }
    nlohmann::json operator()(int64_t i) const { return i; }
    nlohmann::json operator()(double d) const { return d; }
    nlohmann::json operator()(const std::string& s) const { return s; }
  } json;
  return std::visit(json, v);
}

static SettingValue from_json(const nlohmann::json& j) {
  if (j.is_null()) return std::monostate{};
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number()) return j.get<double>();
  return j.get<std::string>();
}

// The settings marked `travels` in the table (config/settings_table.cpp): the ones that shape the
// ModelRunner. max_model_len goes as given (0: unset): every rank's ModelRunner settles it alike,
// from the KV blocks agreed over the ranks.
std::vector<uint8_t> encode_settings(const EngineConfig& c, const ModelConfig& mcfg) {
  nlohmann::json j = {{"model", model_dims(mcfg)}};
  for (const Setting& s : engine_settings())
    if (s.travels) j[s.name] = to_json(s.get(c));
  const std::string s = j.dump();
  return {s.begin(), s.end()};
}

void apply_settings(const std::vector<uint8_t>& bytes, EngineConfig& c, const ModelConfig& mcfg) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("tensor parallel: bad settings message from rank 0: ") + e.what());
  }
  if (j["model"] != model_dims(mcfg))
    throw UserError("tensor parallel: rank " + std::to_string(c.tp_rank) + "'s model " + model_dims(mcfg).dump() +
                    " differs from rank 0's " + j["model"].dump());
  // Rank 0's values replace this rank's own flags; the kernel options go as every KEY=VALUE, so
  // this rank's environment plays no part either (ranks launching different kernels could hang).
  for (const Setting& s : engine_settings()) {
    if (!s.travels) continue;
    if (!j.contains(s.name)) throw Error("tensor parallel: rank 0's settings lack " + s.name);
    try {
      s.set(c, from_json(j[s.name]));
    } catch (const UserError& e) {
      std::string what = s.name;  // "kernel options"
      for (char& ch : what)
        if (ch == '_') ch = ' ';
      throw Error("tensor parallel: rank 0's " + what + ": " + e.what());
    }
  }
}

}  // namespace nanovllm
