// KernelOptions: one table of the options (key, environment variable, parse, print) serves the
// environment overrides, --kernel-options, to_string() and the tensor-parallel settings message.
#include "nanovllm/config/kernel_options.h"

#include <initializer_list>
#include <tuple>
#include <vector>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

struct Option {
  const char* key;
  const char* env;     // null: no environment override
  const char* values;  // what the error message offers
  // Parses `v` into o; false when v is not a legal value.
  bool (*parse)(KernelOptions& o, const std::string& v);
  std::string (*print)(const KernelOptions& o);
};

bool parse_bool(const std::string& v, bool& out) {
  if (v == "on" || v == "1" || v == "true") {
    out = true;
    return true;
  }
  if (v == "off" || v == "0" || v == "false") {
    out = false;
    return true;
  }
  return false;
}

// A whole decimal int in [lo, hi] (no sign, no trailing text).
bool parse_int(const std::string& v, int lo, int hi, int& out) {
  if (v.empty() || v.size() > 6) return false;
  int n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n < lo || n > hi) return false;
  out = n;
  return true;
}

std::string on_off(bool b) { return b ? "on" : "off"; }

const char* gemv_norm_name(GemvNormFusion g) {
  switch (g) {
    case GemvNormFusion::Never: return "never";
    case GemvNormFusion::Auto: return "auto";
    case GemvNormFusion::Always: return "always";
  }
  return "?";
}

}  // namespace

const char* int_gemv_name(IntGemv g) {
  switch (g) {
    case IntGemv::V1: return "v1";
    case IntGemv::V2: return "v2";
    case IntGemv::V3: return "v3";
    case IntGemv::V4: return "v4";
    case IntGemv::V5: return "v5";
    case IntGemv::Auto: return "auto";
  }
  return "?";
}

const char* int_gemm_name(IntGemm g) {
  switch (g) {
    case IntGemm::Auto: return "auto";
    case IntGemm::Mma: return "mma";
    case IntGemm::Wgmma: return "wgmma";
    case IntGemm::WgmmaWide: return "wgmma_wide";
    case IntGemm::WgmmaSs: return "wgmma_ss";
    case IntGemm::Dequantize: return "dequantize";
  }
  return "?";
}

const char* gemm_name(Gemm g) {
  switch (g) {
    case Gemm::Auto: return "auto";
    case Gemm::CublasLt: return "cublaslt";
    case Gemm::Wgmma: return "wgmma";
  }
  return "?";
}

const char* gemm_pingpong_name(GemmPingPong g) {
  switch (g) {
    case GemmPingPong::Auto: return "auto";
    case GemmPingPong::On: return "on";
    case GemmPingPong::Off: return "off";
  }
  return "?";
}

namespace {

const char* prefill_attention_name(PrefillAttention p) {
  switch (p) {
    case PrefillAttention::Auto: return "auto";
    case PrefillAttention::WgmmaTma: return "wgmma_tma";
    case PrefillAttention::Wgmma: return "wgmma";
    case PrefillAttention::Mma: return "mma";
    case PrefillAttention::Tiled: return "tiled";
  }
  return "?";
}

const char* rope_kernel_name(RopeKernel r) {
  switch (r) {
    case RopeKernel::Auto: return "auto";
    case RopeKernel::Head: return "head";
    case RopeKernel::Token: return "token";
  }
  return "?";
}

// v as one of `all` by its name (name(e) == v) into out; false: none is called v.
template <class E>
bool parse_named(const std::string& v, std::initializer_list<E> all, const char* (*name)(E), E& out) {
  for (E e : all)
    if (v == name(e)) {
      out = e;
      return true;
    }
  return false;
}

const std::vector<Option>& options() {
  static const std::vector<Option> table = {
      {"pdl", "NANOVLLM_PDL", "on or off", [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.pdl); },
       [](const KernelOptions& o) { return on_off(o.pdl); }},
      {"gemv_norm", "NANOVLLM_GEMV_NORM", "auto, never or always (1, 0, 2)",
       [](KernelOptions& o, const std::string& v) {
         for (GemvNormFusion g : {GemvNormFusion::Never, GemvNormFusion::Auto, GemvNormFusion::Always})
           if (v == gemv_norm_name(g) || v == std::to_string(int(g))) {
             o.gemv_norm = g;
             return true;
           }
         return false;
       },
       [](const KernelOptions& o) { return std::string(gemv_norm_name(o.gemv_norm)); }},
      {"max_decode_splits", "NANOVLLM_DECODE_SPLITS", "an integer in [1, 16]",
       [](KernelOptions& o, const std::string& v) {
         return parse_int(v, 1, KernelOptions::kMaxDecodeSplits, o.max_decode_splits);
       },
       [](const KernelOptions& o) { return std::to_string(o.max_decode_splits); }},
      {"long_decode_context", "NANOVLLM_LONG_DECODE_CONTEXT", "0 (off) or a key count up to 999999",
       [](KernelOptions& o, const std::string& v) { return parse_int(v, 0, 999999, o.long_decode_context); },
       [](const KernelOptions& o) { return std::to_string(o.long_decode_context); }},
      {"long_decode_splits", "NANOVLLM_LONG_DECODE_SPLITS", "an integer in [1, 128]",
       [](KernelOptions& o, const std::string& v) {
         return parse_int(v, 1, KernelOptions::kMaxLongDecodeSplits, o.long_decode_splits);
       },
       [](const KernelOptions& o) { return std::to_string(o.long_decode_splits); }},
      {"decode_cluster", "NANOVLLM_DECODE_CLUSTER", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.decode_cluster); },
       [](const KernelOptions& o) { return on_off(o.decode_cluster); }},
      {"decode_warps", "NANOVLLM_DECODE_WARPS", "4 or 8",
       [](KernelOptions& o, const std::string& v) {
         int n = 0;
         if (!parse_int(v, 4, 8, n) || (n != 4 && n != 8)) return false;
         o.decode_warps = n;
         return true;
       },
       [](const KernelOptions& o) { return std::to_string(o.decode_warps); }},
      {"decode_read_ahead", "NANOVLLM_DECODE_READ_AHEAD", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.decode_read_ahead); },
       [](const KernelOptions& o) { return on_off(o.decode_read_ahead); }},
      {"p2p_all_reduce", "NANOVLLM_P2P_ALLREDUCE", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.p2p_all_reduce); },
       [](const KernelOptions& o) { return on_off(o.p2p_all_reduce); }},
      {"all_reduce_norm", "NANOVLLM_ALLREDUCE_NORM", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.all_reduce_norm); },
       [](const KernelOptions& o) { return on_off(o.all_reduce_norm); }},
      {"prefill_attention", "NANOVLLM_PREFILL_ATTENTION", "auto, wgmma_tma, wgmma, mma or tiled",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<PrefillAttention>(v,
                                              {PrefillAttention::Auto, PrefillAttention::WgmmaTma,
                                               PrefillAttention::Wgmma, PrefillAttention::Mma, PrefillAttention::Tiled},
                                              prefill_attention_name, o.prefill_attention);
       },
       [](const KernelOptions& o) { return std::string(prefill_attention_name(o.prefill_attention)); }},
      {"prefill_persistent", "NANOVLLM_PREFILL_PERSISTENT", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.prefill_persistent); },
       [](const KernelOptions& o) { return on_off(o.prefill_persistent); }},
      {"fp8_gemm", "NANOVLLM_FP8_GEMM", "auto or dequantize",
       [](KernelOptions& o, const std::string& v) {
         if (v != "auto" && v != "dequantize") return false;
         o.fp8_gemm = v == "auto" ? Fp8Gemm::Auto : Fp8Gemm::Dequantize;
         return true;
       },
       [](const KernelOptions& o) { return std::string(o.fp8_gemm == Fp8Gemm::Auto ? "auto" : "dequantize"); }},
      {"int_gemv", "NANOVLLM_INT_GEMV", "auto, v1, v2, v3, v4 or v5",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<IntGemv>(v,
                                     {IntGemv::V1, IntGemv::V2, IntGemv::V3, IntGemv::V4, IntGemv::V5, IntGemv::Auto},
                                     int_gemv_name, o.int_gemv);
       },
       [](const KernelOptions& o) { return std::string(int_gemv_name(o.int_gemv)); }},
      {"int_gemm", "NANOVLLM_INT_GEMM", "auto, mma, wgmma, wgmma_wide, wgmma_ss or dequantize",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<IntGemm>(
             v,
             {IntGemm::Auto, IntGemm::Mma, IntGemm::Wgmma, IntGemm::WgmmaWide, IntGemm::WgmmaSs, IntGemm::Dequantize},
             int_gemm_name, o.int_gemm);
       },
       [](const KernelOptions& o) { return std::string(int_gemm_name(o.int_gemm)); }},
      {"int_gemm_cluster", "NANOVLLM_INT_GEMM_CLUSTER", "RxC with R and C 1, 2 or 4 and R x C at most 8",
       [](KernelOptions& o, const std::string& v) {
         if (v.size() != 3 || v[1] != 'x' || !int_gemm_cluster_valid(v[0] - '0', v[2] - '0')) return false;
         o.int_gemm_cluster_rows = v[0] - '0';
         o.int_gemm_cluster_cols = v[2] - '0';
         return true;
       },
       [](const KernelOptions& o) {
         return std::to_string(o.int_gemm_cluster_rows) + "x" + std::to_string(o.int_gemm_cluster_cols);
       }},
      {"rope_kernel", "NANOVLLM_ROPE_KERNEL", "auto, head or token",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<RopeKernel>(v, {RopeKernel::Auto, RopeKernel::Head, RopeKernel::Token}, rope_kernel_name,
                                        o.rope_kernel);
       },
       [](const KernelOptions& o) { return std::string(rope_kernel_name(o.rope_kernel)); }},
      {"gemm", "NANOVLLM_GEMM", "auto, cublaslt or wgmma",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<Gemm>(v, {Gemm::Auto, Gemm::CublasLt, Gemm::Wgmma}, gemm_name, o.gemm);
       },
       [](const KernelOptions& o) { return std::string(gemm_name(o.gemm)); }},
      {"gemm_norm", "NANOVLLM_GEMM_NORM", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.gemm_norm); },
       [](const KernelOptions& o) { return on_off(o.gemm_norm); }},
      {"gemm_pair", "NANOVLLM_GEMM_PAIR", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.gemm_pair); },
       [](const KernelOptions& o) { return on_off(o.gemm_pair); }},
      {"gemm_pingpong", "NANOVLLM_GEMM_PINGPONG", "auto, on or off",
       [](KernelOptions& o, const std::string& v) {
         return parse_named<GemmPingPong>(v, {GemmPingPong::Auto, GemmPingPong::On, GemmPingPong::Off},
                                          gemm_pingpong_name, o.gemm_pingpong);
       },
       [](const KernelOptions& o) { return std::string(gemm_pingpong_name(o.gemm_pingpong)); }},
      {"norm_fold", "NANOVLLM_NORM_FOLD", "on or off",
       [](KernelOptions& o, const std::string& v) { return parse_bool(v, o.norm_fold); },
       [](const KernelOptions& o) { return on_off(o.norm_fold); }},
  };
  return table;
}

std::string known_keys() {
  std::string s;
  for (const Option& opt : options()) s += (s.empty() ? "" : ", ") + std::string(opt.key);
  return s;
}

void set_option(KernelOptions& o, const Option& opt, const std::string& value, const std::string& where) {
  if (!opt.parse(o, value))
    throw UserError(where + ": kernel option " + opt.key + " must be " + opt.values + " (got '" + value + "')");
}

// One KEY=VALUE pair; `where` names the source in errors.
void set_kernel_option(KernelOptions& o, const std::string& key, const std::string& value, const std::string& where) {
  for (const Option& opt : options())
    if (key == opt.key) return set_option(o, opt, value, where);
  throw UserError(where + ": unknown kernel option '" + key + "' (known: " + known_keys() + ")");
}

}  // namespace

bool operator==(const KernelOptions& a, const KernelOptions& b) {
  auto fields = [](const KernelOptions& o) {
    return std::tie(o.pdl, o.gemv_norm, o.max_decode_splits, o.long_decode_context, o.long_decode_splits,
                    o.decode_cluster, o.decode_warps, o.decode_read_ahead, o.p2p_all_reduce, o.all_reduce_norm,
                    o.prefill_attention, o.prefill_persistent, o.fp8_gemm, o.int_gemv, o.int_gemm,
                    o.int_gemm_cluster_rows, o.int_gemm_cluster_cols, o.rope_kernel, o.gemm, o.gemm_norm, o.gemm_pair,
                    o.gemm_pingpong, o.norm_fold);
  };
  return fields(a) == fields(b);
}

void KernelOptions::validate() const {
  // The fields a C++ caller may set to anything; the enums and bools hold only legal values.
  if (max_decode_splits < 1 || max_decode_splits > kMaxDecodeSplits)
    throw UserError("kernel option max_decode_splits must be in [1, " + std::to_string(kMaxDecodeSplits) + "] (got " +
                    std::to_string(max_decode_splits) + ")");
  if (long_decode_context < 0 || long_decode_context > 999999)
    throw UserError("kernel option long_decode_context must be in [0, 999999] (got " +
                    std::to_string(long_decode_context) + ")");
  if (long_decode_splits < 1 || long_decode_splits > kMaxLongDecodeSplits)
    throw UserError("kernel option long_decode_splits must be in [1, " + std::to_string(kMaxLongDecodeSplits) +
                    "] (got " + std::to_string(long_decode_splits) + ")");
  if (decode_warps != 4 && decode_warps != 8)
    throw UserError("kernel option decode_warps must be 4 or 8 (got " + std::to_string(decode_warps) + ")");
  if (int(gemv_norm) < 0 || int(gemv_norm) > 2)
    throw UserError("kernel option gemv_norm must be never, auto or always (got " + std::to_string(int(gemv_norm)) +
                    ")");
  if (fp8_gemm != Fp8Gemm::Auto && fp8_gemm != Fp8Gemm::Dequantize)
    throw UserError("kernel option fp8_gemm must be auto or dequantize (got " + std::to_string(int(fp8_gemm)) + ")");
  if (int(int_gemv) < int(IntGemv::V1) || int(int_gemv) > int(IntGemv::Auto))
    throw UserError("kernel option int_gemv must be auto, v1, v2, v3, v4 or v5 (got " + std::to_string(int(int_gemv)) +
                    ")");
  if (int_gemm != IntGemm::Auto && int_gemm != IntGemm::Mma && int_gemm != IntGemm::Wgmma &&
      int_gemm != IntGemm::WgmmaWide && int_gemm != IntGemm::WgmmaSs && int_gemm != IntGemm::Dequantize)
    throw UserError("kernel option int_gemm must be auto, mma, wgmma, wgmma_wide, wgmma_ss or dequantize (got " +
                    std::to_string(int(int_gemm)) + ")");
  if (!int_gemm_cluster_valid(int_gemm_cluster_rows, int_gemm_cluster_cols))
    throw UserError("kernel option int_gemm_cluster must be RxC with R and C 1, 2 or 4 and R x C at most 8 (got " +
                    std::to_string(int_gemm_cluster_rows) + "x" + std::to_string(int_gemm_cluster_cols) + ")");
  if (rope_kernel != RopeKernel::Auto && rope_kernel != RopeKernel::Head && rope_kernel != RopeKernel::Token)
    throw UserError("kernel option rope_kernel must be auto, head or token (got " + std::to_string(int(rope_kernel)) +
                    ")");
  if (gemm != Gemm::Auto && gemm != Gemm::CublasLt && gemm != Gemm::Wgmma)
    throw UserError("kernel option gemm must be auto, cublaslt or wgmma (got " + std::to_string(int(gemm)) + ")");
  if (int(prefill_attention) < 0 || int(prefill_attention) > 4)
    throw UserError("kernel option prefill_attention must be auto, wgmma_tma, wgmma, mma or tiled (got " +
                    std::to_string(int(prefill_attention)) + ")");
}

std::string KernelOptions::to_string(const std::string& sep) const {
  std::string s;
  for (const Option& opt : options()) s += (s.empty() ? "" : sep) + std::string(opt.key) + "=" + opt.print(*this);
  return s;
}

void apply_kernel_options(KernelOptions& o, const std::string& spec) {
  const std::string where = "--kernel-options";
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    const std::string pair = spec.substr(begin, end - begin);
    const size_t eq = pair.find('=');
    if (eq == std::string::npos)
      throw UserError(where + ": expected KEY=VALUE[,KEY=VALUE...], got '" + pair + "' (keys: " + known_keys() + ")");
    set_kernel_option(o, pair.substr(0, eq), pair.substr(eq + 1), where);
    begin = end + 1;
  }
}

void apply_kernel_env_overrides(KernelOptions& o, const EnvLookup& getenv) {
  for (const Option& opt : options())
    if (const char* v = opt.env ? getenv(opt.env) : nullptr; v && *v)
      set_option(o, opt, v, opt.env + std::string("=") + v);
}

}  // namespace nanovllm
