#include "nanovllm/engine/tp_protocol.h"

#include <nlohmann/json.hpp>

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

std::vector<uint8_t> encode_settings(const EngineConfig& c, const ModelConfig& mcfg) {
  nlohmann::json j = {{"device", c.device},
                      {"load_dummy", c.load_dummy},
                      {"max_num_seqs", c.max_num_seqs},
                      {"max_num_batched_tokens", c.max_num_batched_tokens},
                      // As given (0: unset): every rank's ModelRunner settles it alike, from the
                      // KV blocks agreed over the ranks.
                      {"max_model_len", c.max_model_len},
                      {"block_size", c.block_size},
                      {"gpu_memory_utilization", c.gpu_memory_utilization},
                      {"kv_cache_memory", c.kv_cache_memory},
                      {"num_kvcache_blocks", c.num_kvcache_blocks},
                      {"kv_cache_dtype", kv_cache_dtype_name(c.kv_cache_dtype)},
                      {"quantization", quantization_name(c.quantization)},
                      {"enforce_eager", c.enforce_eager},
                      {"profile_ops", c.profile_ops},
                      {"kernels", c.kernels.to_string(",")},
                      {"model", model_dims(mcfg)}};
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
  c.device = j["device"];
  c.load_dummy = j["load_dummy"];
  c.max_num_seqs = j["max_num_seqs"];
  c.max_num_batched_tokens = j["max_num_batched_tokens"];
  c.max_model_len = j["max_model_len"];
  c.block_size = j["block_size"];
  c.gpu_memory_utilization = j["gpu_memory_utilization"];
  c.kv_cache_memory = j["kv_cache_memory"];
  c.num_kvcache_blocks = j["num_kvcache_blocks"];
  c.kv_cache_dtype = parse_kv_cache_dtype(j["kv_cache_dtype"].get<std::string>());
  c.quantization = parse_quantization(j["quantization"].get<std::string>());
  c.enforce_eager = j["enforce_eager"];
  c.profile_ops = j["profile_ops"];
  // Rank 0's kernel options, in --kernel-options form, onto the defaults: this rank's own
  // environment and flags play no part (ranks launching different kernels could hang).
  KernelOptions kernels;
  try {
    apply_kernel_options(kernels, j["kernels"].get<std::string>());
  } catch (const UserError& e) {
    throw Error(std::string("tensor parallel: rank 0's kernel options: ") + e.what());
  }
  c.kernels = kernels;
}

}  // namespace nanovllm
