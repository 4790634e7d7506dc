// KernelOptions (kernel_options.h): the NANOVLLM_* environment overrides and --kernel-options parse
// into the struct, bad values are refused with a UserError naming the variable or key, to_string()
// reads back to the same options, and EngineConfig::validate() checks fields set from C++.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nanovllm/config/config.h"
#include "nanovllm/config/kernel_options.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

KernelOptions from_env(const std::map<std::string, std::string>& env) {
  KernelOptions o;
  apply_kernel_env_overrides(o, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  return o;
}

// The UserError message of applying `env`, or "" when it was accepted.
std::string env_error(const std::map<std::string, std::string>& env) {
  try {
    from_env(env);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string spec_error(const std::string& spec) {
  KernelOptions o;
  try {
    apply_kernel_options(o, spec);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(KernelOptions, DefaultsAreTheMeasuredBest) {
  const KernelOptions o;
  EXPECT_EQ(o.to_string(),
            "pdl=on gemv_norm=auto max_decode_splits=16 long_decode_context=8192 long_decode_splits=64 "
            "decode_cluster=off decode_warps=8 decode_read_ahead=on p2p_all_reduce=on all_reduce_norm=on "
            "prefill_attention=auto prefill_persistent=on fp8_gemm=auto int_gemv=auto int_gemm=auto "
            "int_gemm_cluster=1x1 rope_kernel=auto "
            "gemm=auto gemm_norm=off gemm_pair=on gemm_pingpong=auto norm_fold=off");
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(from_env({}), o);  // no variables set: nothing changes
}

TEST(KernelOptions, EnvironmentOverridesEveryField) {
  const KernelOptions o = from_env({{"NANOVLLM_PDL", "0"},
                                    {"NANOVLLM_GEMV_NORM", "2"},
                                    {"NANOVLLM_DECODE_SPLITS", "4"},
                                    {"NANOVLLM_LONG_DECODE_CONTEXT", "0"},
                                    {"NANOVLLM_LONG_DECODE_SPLITS", "128"},
                                    {"NANOVLLM_DECODE_CLUSTER", "1"},
                                    {"NANOVLLM_DECODE_WARPS", "4"},
                                    {"NANOVLLM_DECODE_READ_AHEAD", "off"},
                                    {"NANOVLLM_P2P_ALLREDUCE", "0"},
                                    {"NANOVLLM_ALLREDUCE_NORM", "off"},
                                    {"NANOVLLM_PREFILL_ATTENTION", "tiled"},
                                    {"NANOVLLM_PREFILL_PERSISTENT", "off"},
                                    {"NANOVLLM_GEMM_NORM", "on"},
                                    {"NANOVLLM_GEMM_PAIR", "off"},
                                    {"NANOVLLM_GEMM_PINGPONG", "on"},
                                    {"NANOVLLM_NORM_FOLD", "on"},
                                    {"NANOVLLM_FP8_GEMM", "dequantize"},
                                    {"NANOVLLM_INT_GEMV", "v1"},
                                    {"NANOVLLM_INT_GEMM", "dequantize"},
                                    {"NANOVLLM_INT_GEMM_CLUSTER", "4x2"},
                                    {"NANOVLLM_ROPE_KERNEL", "head"},
                                    {"NANOVLLM_GEMM", "cublaslt"}});
  EXPECT_FALSE(o.pdl);
  EXPECT_EQ(o.gemv_norm, GemvNormFusion::Always);
  EXPECT_EQ(o.max_decode_splits, 4);
  EXPECT_EQ(o.long_decode_context, 0);
  EXPECT_EQ(o.long_decode_splits, 128);
  EXPECT_TRUE(o.decode_cluster);
  EXPECT_EQ(o.decode_warps, 4);
  EXPECT_FALSE(o.decode_read_ahead);
  EXPECT_FALSE(o.p2p_all_reduce);
  EXPECT_FALSE(o.all_reduce_norm);
  EXPECT_EQ(o.prefill_attention, PrefillAttention::Tiled);
  EXPECT_FALSE(o.prefill_persistent);
  EXPECT_TRUE(o.gemm_norm);
  EXPECT_FALSE(o.gemm_pair);
  EXPECT_EQ(o.gemm_pingpong, GemmPingPong::On);
  EXPECT_TRUE(o.norm_fold);
  EXPECT_EQ(o.fp8_gemm, Fp8Gemm::Dequantize);
  EXPECT_EQ(o.int_gemv, IntGemv::V1);
  EXPECT_EQ(o.int_gemm, IntGemm::Dequantize);
  EXPECT_EQ(o.int_gemm_cluster_rows, 4);
  EXPECT_EQ(o.int_gemm_cluster_cols, 2);
  EXPECT_EQ(o.rope_kernel, RopeKernel::Head);
  EXPECT_EQ(o.gemm, Gemm::CublasLt);
  // The numeric forms of the old variables and the names are the same values.
  EXPECT_EQ(from_env({{"NANOVLLM_GEMV_NORM", "0"}}).gemv_norm, GemvNormFusion::Never);
  EXPECT_EQ(from_env({{"NANOVLLM_GEMV_NORM", "never"}}).gemv_norm, GemvNormFusion::Never);
  EXPECT_EQ(from_env({{"NANOVLLM_GEMV_NORM", "1"}}).gemv_norm, GemvNormFusion::Auto);
  EXPECT_TRUE(from_env({{"NANOVLLM_PDL", "1"}}).pdl);
  EXPECT_TRUE(from_env({{"NANOVLLM_PDL", "true"}}).pdl);
  EXPECT_TRUE(from_env({{"NANOVLLM_PDL", ""}}).pdl);  // empty: as if unset
  EXPECT_EQ(from_env({{"NANOVLLM_PREFILL_ATTENTION", "wgmma"}}).prefill_attention, PrefillAttention::Wgmma);
  EXPECT_EQ(from_env({{"NANOVLLM_PREFILL_ATTENTION", "mma"}}).prefill_attention, PrefillAttention::Mma);
}

TEST(KernelOptions, BadEnvironmentValuesAreRefusedByName) {
  EXPECT_EQ(env_error({{"NANOVLLM_DECODE_WARPS", "6"}}),
            "NANOVLLM_DECODE_WARPS=6: kernel option decode_warps must be 4 or 8 (got '6')");
  EXPECT_EQ(env_error({{"NANOVLLM_DECODE_WARPS", "16"}}),
            "NANOVLLM_DECODE_WARPS=16: kernel option decode_warps must be 4 or 8 (got '16')");
  EXPECT_EQ(env_error({{"NANOVLLM_DECODE_SPLITS", "32"}}),
            "NANOVLLM_DECODE_SPLITS=32: kernel option max_decode_splits must be an integer in [1, 16] (got '32')");
  for (const char* bad : {"0", "-1", "8x", " 8", "99999999999"})
    EXPECT_NE(env_error({{"NANOVLLM_DECODE_SPLITS", bad}}), "") << bad;
  EXPECT_NE(env_error({{"NANOVLLM_PDL", "yes"}}).find("NANOVLLM_PDL=yes: kernel option pdl must be on or off"),
            std::string::npos);
  EXPECT_NE(env_error({{"NANOVLLM_GEMV_NORM", "3"}}).find("gemv_norm must be auto, never or always"),
            std::string::npos);
  EXPECT_NE(env_error({{"NANOVLLM_PREFILL_ATTENTION", "flash"}}).find("auto, wgmma_tma, wgmma, mma or tiled"),
            std::string::npos);
  EXPECT_EQ(env_error({{"NANOVLLM_LONG_DECODE_SPLITS", "129"}}),
            "NANOVLLM_LONG_DECODE_SPLITS=129: kernel option long_decode_splits must be an integer in [1, 128] (got "
            "'129')");
  EXPECT_NE(env_error({{"NANOVLLM_LONG_DECODE_CONTEXT", "1000000"}}).find("long_decode_context must be 0 (off)"),
            std::string::npos);
  EXPECT_NE(env_error({{"NANOVLLM_LONG_DECODE_CONTEXT", "-5"}}), "");
  EXPECT_EQ(env_error({{"NANOVLLM_DECODE_WARPS", "8"}, {"NANOVLLM_DECODE_SPLITS", "1"}}), "");
}

TEST(KernelOptions, CliSpecParsesAndRoundTrips) {
  KernelOptions o;
  apply_kernel_options(o, "pdl=off,max_decode_splits=8,prefill_attention=mma,fp8_gemm=dequantize,int_gemv=v1");
  EXPECT_EQ(o.fp8_gemm, Fp8Gemm::Dequantize);
  EXPECT_EQ(o.int_gemv, IntGemv::V1);
  apply_kernel_options(o, "int_gemv=v3");
  EXPECT_EQ(o.int_gemv, IntGemv::V3);
  apply_kernel_options(o, "int_gemv=v4");
  EXPECT_EQ(o.int_gemv, IntGemv::V4);
  EXPECT_NE(o.to_string().find("int_gemv=v4"), std::string::npos);
  EXPECT_EQ(from_env({{"NANOVLLM_INT_GEMV", "v4"}}).int_gemv, IntGemv::V4);
  EXPECT_NE(spec_error("int_gemv=v6").find("int_gemv must be auto, v1, v2, v3, v4 or v5"), std::string::npos);
  KernelOptions bad;
  bad.int_gemv = static_cast<IntGemv>(7);
  EXPECT_THROW(bad.validate(), UserError);
  EXPECT_NE(spec_error("int_gemm=marlin").find("int_gemm must be auto, mma, wgmma, wgmma_wide, wgmma_ss or dequantize"),
            std::string::npos);
  apply_kernel_options(o, "int_gemm=dequantize");
  EXPECT_EQ(o.int_gemm, IntGemm::Dequantize);
  apply_kernel_options(o, "int_gemm=auto");
  EXPECT_EQ(o.int_gemm, IntGemm::Auto);
  apply_kernel_options(o, "int_gemm=mma");
  EXPECT_EQ(o.int_gemm, IntGemm::Mma);
  apply_kernel_options(o, "int_gemm=wgmma_wide");
  EXPECT_EQ(o.int_gemm, IntGemm::WgmmaWide);
  apply_kernel_options(o, "int_gemm=wgmma_ss");
  EXPECT_EQ(o.int_gemm, IntGemm::WgmmaSs);
  EXPECT_NE(o.to_string().find("int_gemm=wgmma_ss"), std::string::npos);
  apply_kernel_options(o, "int_gemm=wgmma");
  EXPECT_EQ(o.int_gemm, IntGemm::Wgmma);
  apply_kernel_options(o, "int_gemm_cluster=2x4");
  EXPECT_EQ(o.int_gemm_cluster_rows, 2);
  EXPECT_EQ(o.int_gemm_cluster_cols, 4);
  EXPECT_NE(o.to_string().find("int_gemm_cluster=2x4"), std::string::npos);
  EXPECT_EQ(from_env({{"NANOVLLM_INT_GEMM_CLUSTER", "1x4"}}).int_gemm_cluster_cols, 4);
  for (const char* bad_cluster : {"int_gemm_cluster=3x1", "int_gemm_cluster=4x4", "int_gemm_cluster=0x1",
                                  "int_gemm_cluster=2", "int_gemm_cluster=2x", "int_gemm_cluster=2*2"})
    EXPECT_NE(spec_error(bad_cluster).find("int_gemm_cluster must be RxC"), std::string::npos) << bad_cluster;
  KernelOptions bad_c;
  bad_c.int_gemm_cluster_cols = 3;
  EXPECT_THROW(bad_c.validate(), UserError);
  bad_c.int_gemm_cluster_cols = 4;
  bad_c.int_gemm_cluster_rows = 4;
  EXPECT_THROW(bad_c.validate(), UserError);
  EXPECT_NE(spec_error("fp8_gemm=cublas").find("fp8_gemm must be auto or dequantize"), std::string::npos);
  EXPECT_NE(spec_error("rope_kernel=warp").find("rope_kernel must be auto, head or token"), std::string::npos);
  apply_kernel_options(o, "rope_kernel=token");
  EXPECT_EQ(o.rope_kernel, RopeKernel::Token);
  EXPECT_NE(spec_error("gemm=cutlass").find("gemm must be auto, cublaslt or wgmma"), std::string::npos);
  apply_kernel_options(o, "gemm=wgmma");
  EXPECT_EQ(o.gemm, Gemm::Wgmma);
  KernelOptions bad_gemm;
  bad_gemm.gemm = Gemm(7);
  EXPECT_THROW(bad_gemm.validate(), UserError);
  EXPECT_FALSE(o.pdl);
  EXPECT_EQ(o.max_decode_splits, 8);
  EXPECT_EQ(o.prefill_attention, PrefillAttention::Mma);
  EXPECT_FALSE(o.decode_cluster);  // untouched
  // to_string() with ',' is a spec that gives back the same options, from any starting point.
  KernelOptions back;
  back.decode_warps = 4;
  apply_kernel_options(back, o.to_string(","));
  EXPECT_EQ(back, o);
  EXPECT_NE(back, KernelOptions());
}

TEST(KernelOptions, BadCliSpecsAreRefused) {
  EXPECT_EQ(spec_error("decode_warps=4"), "");
  EXPECT_NE(spec_error("warps=4").find("--kernel-options: unknown kernel option 'warps' (known: pdl, gemv_norm"),
            std::string::npos);
  EXPECT_NE(spec_error("pdl").find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(spec_error("pdl=off,").find("expected KEY=VALUE"), std::string::npos);
  EXPECT_EQ(spec_error("decode_warps=5"), "--kernel-options: kernel option decode_warps must be 4 or 8 (got '5')");
  EXPECT_NE(spec_error("PDL=off").find("unknown kernel option 'PDL'"), std::string::npos);
}

TEST(KernelOptions, EngineConfigValidatesFieldsSetFromCpp) {
  EngineConfig cfg;
  cfg.model = "m";
  EXPECT_NO_THROW(cfg.validate());
  cfg.kernels.decode_warps = 6;
  try {
    cfg.validate();
    ADD_FAILURE() << "decode_warps 6 accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "kernel option decode_warps must be 4 or 8 (got 6)");
  }
  cfg.kernels.decode_warps = 8;
  cfg.kernels.max_decode_splits = 0;
  EXPECT_THROW(cfg.validate(), UserError);
  cfg.kernels.max_decode_splits = 17;
  EXPECT_THROW(cfg.validate(), UserError);
  cfg.kernels.max_decode_splits = 16;
  EXPECT_NO_THROW(cfg.validate());
}

}  // namespace
