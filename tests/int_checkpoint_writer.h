// Tiny AWQ, GPTQ and compressed-tensors checkpoints written by the tests themselves, packed as each
// format's own code packs them (written here from the formats' specifications, independently of
// models/int_formats.cpp):
//   AWQ   qweight I32 [K, N/8] with nibble i of word (k, c) = code of output 8c + [0,2,4,6,1,3,5,7][i];
//         qzeros the same over [K/G, N/8]; scales F16 [K/G, N]
//   GPTQ  qweight I32 [K/pf, N] with field i of word (r, n) = code of input r * pf + i; qzeros I32
//         [K/G, N/pf] along N holding z - 1 (v1) or z (v2); scales F16 [K/G, N]; g_idx I32 [K]
//   CT    weight_packed I32 [N, K/pf] along K (codes: the signed values + 2^(bits-1)); weight_scale
//         BF16 [N, K/G]; weight_zero_point I32 [N/pf, K/G] along N when asymmetric; weight_shape;
//         weight_g_idx with act order
// Each layer is random codes, zeros and scales (exactly representable in F16 and BF16), and the same
// model is also written with its dequantized values (code - zero) * scale in F32: what an engine on
// the quantized checkpoint must compute. Qwen3 sizes: hidden 256, intermediate 256, 4 heads of 32
// (q 128), 2 KV heads (k, v 64 rows), 2 layers, vocabulary 320; or Qwen3-MoE (IntSpec::moe), whose
// experts are packed as dense Linears ("mlp.experts.E.gate_proj.qweight", ...).
#pragma once
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "safetensors_writer.h"

namespace nanovllm::test {

enum class IntFormat { AWQ, GPTQv1, GPTQv2, CT };

struct IntSpec {
  IntFormat format = IntFormat::AWQ;
  int bits = 4;
  int64_t group = 64;             // -1: one group a row
  bool zero_points = true;        // asymmetric
  bool act_order = false;         // g_idx a permutation of the default k / G
  std::string unconverted;        // modules whose name contains it are written unquantized (AWQ's rule)
  bool moe = false;               // Qwen3-MoE (int_moe_fixture_config): layer 0's MLP 8 experts and a router
  bool quantized_router = false;  // the router written in the format too (engines refuse it)
};

// One quantized linear W [N, K] in the canonical sense: value = (q - zero[g]) * scale[g], g = g_idx[k].
struct IntLayer {
  int64_t N = 0, K = 0, G = 0;
  int bits = 4;
  std::vector<uint8_t> q;          // [N, K] unsigned codes
  std::vector<float> scale, zero;  // [N, K/G]
  std::vector<int32_t> g_idx;      // [K]
  float value(int64_t n, int64_t k) const {
    const int64_t g = g_idx[size_t(k)];
    return (float(q[size_t(n * K + k)]) - zero[size_t(n * (K / G) + g)]) * scale[size_t(n * (K / G) + g)];
  }
};

template <class T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// f -> F16 bits, for normal values with at most 11 significant bits (exact).
inline uint16_t exact_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (f == 0) return 0;
  return uint16_t(((u >> 16) & 0x8000) | ((((u >> 23) & 0xff) - 127 + 15) << 10) | ((u >> 13) & 0x3ff));
}

inline std::vector<int32_t> default_g_idx(int64_t K, int64_t G, std::mt19937* shuffle) {
  std::vector<int32_t> perm(static_cast<size_t>(K)), g(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  if (shuffle) std::shuffle(perm.begin(), perm.end(), *shuffle);
  for (int64_t i = 0; i < K; ++i) g[size_t(perm[size_t(i)])] = int32_t(i / G);  // GPTQ: g_idx[perm[i]] = i / G
  return g;
}

inline IntLayer random_int_layer(int64_t N, int64_t K, const IntSpec& s, const std::vector<int32_t>& g_idx,
                                 std::mt19937& rng) {
  IntLayer l{N, K, s.group > 0 ? s.group : K, s.bits, {}, {}, {}, g_idx};
  const int qmax = (1 << s.bits) - 1, mid = 1 << (s.bits - 1);
  std::uniform_int_distribution<int> code(0, qmax), zero(1, qmax - 1), mant(8, 15), ex(-2, 1);
  l.q.resize(size_t(N * K));
  for (auto& c : l.q) c = uint8_t(code(rng));
  const size_t groups = size_t(N * (K / l.G));
  l.scale.resize(groups);
  l.zero.resize(groups);
  const float base = 1.7f / std::sqrt(float(K)) / float(mid);  // values of std ~ 1 / sqrt(K)
  for (size_t i = 0; i < groups; ++i) {
    const float m = float(mant(rng)) / 8.0f;  // 1.000 .. 1.875: 4 significant bits
    l.scale[i] = std::ldexp(m, ex(rng) + int(std::floor(std::log2(base))));
    l.zero[i] = s.zero_points ? float(zero(rng)) : float(mid);
  }
  return l;
}

// The format's tensors of layer `m` into `out`.
inline void write_int_layer(const IntLayer& l, const IntSpec& s, const std::string& m,
                            std::map<std::string, StTensor>& out) {
  const int64_t N = l.N, K = l.K, G = l.G, groups = K / G, pf = 32 / l.bits;
  const int b = l.bits;
  auto code = [&](int64_t n, int64_t k) { return uint32_t(l.q[size_t(n * K + k)]); };
  auto zero = [&](int64_t n, int64_t g) { return uint32_t(l.zero[size_t(n * groups + g)]); };
  std::vector<uint16_t> sc(size_t(N * groups));
  if (s.format == IntFormat::AWQ) {
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    std::vector<int32_t> qw(size_t(K * N / 8)), qz(size_t(groups * N / 8));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N / 8; ++c) {
        uint32_t w = 0;
        for (int i = 0; i < 8; ++i) w |= code(8 * c + order[i], k) << (4 * i);
        qw[size_t(k * (N / 8) + c)] = int32_t(w);
      }
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t c = 0; c < N / 8; ++c) {
        uint32_t w = 0;
        for (int i = 0; i < 8; ++i) w |= zero(8 * c + order[i], g) << (4 * i);
        qz[size_t(g * (N / 8) + c)] = int32_t(w);
      }
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t n = 0; n < N; ++n) sc[size_t(g * N + n)] = exact_f16(l.scale[size_t(n * groups + g)]);
    out[m + ".qweight"] = {"I32", {K, N / 8}, raw_bytes(qw)};
    out[m + ".qzeros"] = {"I32", {groups, N / 8}, raw_bytes(qz)};
    out[m + ".scales"] = {"F16", {groups, N}, raw_bytes(sc)};
  } else if (s.format == IntFormat::GPTQv1 || s.format == IntFormat::GPTQv2) {
    const uint32_t mask = (1u << b) - 1;
    std::vector<int32_t> qw(size_t(K / pf * N)), qz(size_t(groups * N / pf));
    for (int64_t r = 0; r < K / pf; ++r)
      for (int64_t n = 0; n < N; ++n) {
        uint32_t w = 0;
        for (int64_t i = 0; i < pf; ++i) w |= code(n, r * pf + i) << (b * i);
        qw[size_t(r * N + n)] = int32_t(w);
      }
    const uint32_t minus = s.format == IntFormat::GPTQv1 ? 1 : 0;  // v1 stores z - 1
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t c = 0; c < N / pf; ++c) {
        uint32_t w = 0;
        for (int64_t i = 0; i < pf; ++i) w |= ((zero(c * pf + i, g) - minus) & mask) << (b * i);
        qz[size_t(g * (N / pf) + c)] = int32_t(w);
      }
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t n = 0; n < N; ++n) sc[size_t(g * N + n)] = exact_f16(l.scale[size_t(n * groups + g)]);
    out[m + ".qweight"] = {"I32", {K / pf, N}, raw_bytes(qw)};
    out[m + ".qzeros"] = {"I32", {groups, N / pf}, raw_bytes(qz)};
    out[m + ".scales"] = {"F16", {groups, N}, raw_bytes(sc)};
    out[m + ".g_idx"] = {"I32", {K}, raw_bytes(l.g_idx)};
  } else {
    std::vector<int32_t> wp(size_t(N * K / pf));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < K / pf; ++j) {
        uint32_t w = 0;  // the codes are already the signed values + 2^(bits-1)
        for (int64_t i = 0; i < pf; ++i) w |= code(n, j * pf + i) << (b * i);
        wp[size_t(n * (K / pf) + j)] = int32_t(w);
      }
    std::vector<uint16_t> bf(size_t(N * groups));
    for (size_t i = 0; i < bf.size(); ++i) bf[i] = uint16_t(std::bit_cast<uint32_t>(l.scale[i]) >> 16);  // exact
    out[m + ".weight_packed"] = {"I32", {N, K / pf}, raw_bytes(wp)};
    out[m + ".weight_scale"] = {"BF16", {N, groups}, raw_bytes(bf)};
    out[m + ".weight_shape"] = {"I64", {2}, raw_bytes(std::vector<int64_t>{N, K})};
    if (s.zero_points) {
      std::vector<int32_t> zp(size_t(N / pf * groups));
      for (int64_t r = 0; r < N / pf; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          uint32_t w = 0;
          for (int64_t i = 0; i < pf; ++i) w |= zero(r * pf + i, g) << (b * i);
          zp[size_t(r * groups + g)] = int32_t(w);
        }
      out[m + ".weight_zero_point"] = {"I32", {N / pf, groups}, raw_bytes(zp)};
    }
    if (s.act_order) out[m + ".weight_g_idx"] = {"I32", {K}, raw_bytes(l.g_idx)};
  }
}

inline nlohmann::json int_quantization_config(const IntSpec& s) {
  if (s.format == IntFormat::AWQ)
    return {{"quant_method", "awq"},
            {"bits", s.bits},
            {"group_size", s.group},
            {"zero_point", true},
            {"version", "gemm"},
            {"modules_to_not_convert", s.unconverted.empty() ? nlohmann::json() : nlohmann::json{s.unconverted}}};
  if (s.format != IntFormat::CT)
    return {{"quant_method", "gptq"},  {"bits", s.bits},
            {"group_size", s.group},   {"sym", !s.zero_points},
            {"desc_act", s.act_order}, {"checkpoint_format", s.format == IntFormat::GPTQv1 ? "gptq" : "gptq_v2"},
            {"damp_percent", 0.01},    {"true_sequential", true}};
  nlohmann::json w = {{"num_bits", s.bits},
                      {"type", "int"},
                      {"symmetric", !s.zero_points},
                      {"strategy", s.group > 0 ? "group" : "channel"},
                      {"group_size", s.group > 0 ? nlohmann::json(s.group) : nlohmann::json()},
                      {"actorder", s.act_order ? nlohmann::json("group") : nlohmann::json()},
                      {"dynamic", false},
                      {"observer", "minmax"}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", nullptr}}}}},
          {"ignore", {"lm_head"}},
          {"quantization_status", "compressed"},
          {"kv_cache_scheme", nullptr}};
}

inline nlohmann::json int_fixture_config() {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", 256},
          {"intermediate_size", 256},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 32},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"vocab_size", 320},
          {"bos_token_id", 0},
          {"eos_token_id", 2},
          {"torch_dtype", "float16"}};
}

// The same decoder as Qwen3-MoE: layer 0 sparse (a router to 8 experts of intermediate 128, top 2
// renormalized), layer 1 a dense MLP (mlp_only_layers).
inline nlohmann::json int_moe_fixture_config() {
  nlohmann::json c = int_fixture_config();
  c["architectures"] = {"Qwen3MoeForCausalLM"};
  c["model_type"] = "qwen3_moe";
  c["num_experts"] = 8;
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 128;
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = {1};
  return c;
}

struct IntCheckpoints {
  std::string q, deq;  // directories: the format's, and its dequantized values in F32
};

inline IntCheckpoints write_int_checkpoints(const std::string& dir, const IntSpec& s, uint32_t seed = 11) {
  const nlohmann::json cfg = s.moe ? int_moe_fixture_config() : int_fixture_config();
  const int64_t H = cfg["hidden_size"], I = cfg["intermediate_size"], V = cfg["vocab_size"], D = cfg["head_dim"];
  const int64_t q = int64_t(cfg["num_attention_heads"]) * D, kv = int64_t(cfg["num_key_value_heads"]) * D;
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0, 1);
  std::map<std::string, StTensor> qt, deq;
  auto plain = [&](const std::string& name, std::vector<int64_t> shape, float mean, float sd) {
    std::vector<float> v(size_t(std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>())));
    for (auto& x : v) x = mean + sd * gauss(rng);
    qt[name] = deq[name] = {"F32", shape, raw_bytes(v)};
  };
  // The parts of one packed layer share their input and so their g_idx (GPTQ's act order comes
  // from the layer input's Hessian).
  auto proj = [&](const std::string& m, int64_t N, int64_t K, const std::vector<int32_t>& g_idx) {
    const IntLayer l = random_int_layer(N, K, s, g_idx, rng);
    std::vector<float> w(size_t(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[size_t(n * K + k)] = l.value(n, k);
    deq[m + ".weight"] = {"F32", {N, K}, raw_bytes(w)};
    if (!s.unconverted.empty() && m.find(s.unconverted) != std::string::npos)
      qt[m + ".weight"] = deq[m + ".weight"];
    else
      write_int_layer(l, s, m, qt);
  };
  auto g_idx_for = [&](int64_t K) { return default_g_idx(K, s.group > 0 ? s.group : K, s.act_order ? &rng : nullptr); };
  plain("model.embed_tokens.weight", {V, H}, 0, 1);
  for (int64_t i = 0; i < int64_t(cfg["num_hidden_layers"]); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const auto attn_in = g_idx_for(H), mlp_in = g_idx_for(H);
    proj(p + "self_attn.q_proj", q, H, attn_in);
    proj(p + "self_attn.k_proj", kv, H, attn_in);
    proj(p + "self_attn.v_proj", kv, H, attn_in);
    proj(p + "self_attn.o_proj", H, q, g_idx_for(q));
    plain(p + "self_attn.q_norm.weight", {D}, 1, 0.1f);
    plain(p + "self_attn.k_norm.weight", {D}, 1, 0.1f);
    if (s.moe && i == 0) {  // each expert packed as a dense MLP; the router usually left unquantized
      const int64_t E = cfg["num_experts"], Im = cfg["moe_intermediate_size"];
      if (s.quantized_router)
        proj(p + "mlp.gate", E, H, mlp_in);
      else
        plain(p + "mlp.gate.weight", {E, H}, 0, 0.3f);
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        const auto in = g_idx_for(H);
        proj(x + "gate_proj", Im, H, in);
        proj(x + "up_proj", Im, H, in);
        proj(x + "down_proj", H, Im, g_idx_for(Im));
      }
    } else {
      proj(p + "mlp.gate_proj", I, H, mlp_in);
      proj(p + "mlp.up_proj", I, H, mlp_in);
      proj(p + "mlp.down_proj", H, I, g_idx_for(I));
    }
    plain(p + "input_layernorm.weight", {H}, 1, 0.1f);
    plain(p + "post_attention_layernorm.weight", {H}, 1, 0.1f);
  }
  plain("model.norm.weight", {H}, 1, 0.1f);
  plain("lm_head.weight", {V, H}, 0, 0.2f);
  IntCheckpoints out{dir + "/q", dir + "/deq"};
  for (const auto& [d, tensors, quantized] : {std::tuple{out.q, &qt, true}, std::tuple{out.deq, &deq, false}}) {
    std::filesystem::create_directories(d);
    nlohmann::json c = cfg;
    if (quantized) c["quantization_config"] = int_quantization_config(s);
    std::ofstream(d + "/config.json") << c.dump(2);
    write_safetensors(d + "/model.safetensors", *tensors);
  }
  return out;
}

}  // namespace nanovllm::test
