// EAGLE-3 heads (models/eagle3_config.h, eagle3_head.h) on the CPU: a tiny head written by the test
// with vLLM's key names loads; its forward (catch-up rows, then a row over the cached context)
// equals a direct computation in plain loops; config and checkpoint refusals name the problem.
#include <gtest/gtest.h>

#include <cmath>

#include "eagle3_checkpoint_writer.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/models/eagle3_head.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"

using namespace nanovllm;
using test::Eagle3HeadSpec;

namespace {

const ModelConfig& target() {  // 3 layers, hidden 96, vocabulary 700
  static const ModelConfig m = load_model_config(test::fixture("tiny-qwen3-untied"));
  return m;
}

std::string load_error(const Eagle3HeadSpec& s) {
  test::TempDir d;
  test::write_eagle3_head(d.dir.string(), s);
  try {
    const Eagle3Config c = load_eagle3_config(d.dir.string(), target());
    auto be = make_cpu_backend(1);
    Eagle3Head head(c, *be);
    head.load(d.dir.string(), nullptr);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

using Vec = std::vector<double>;

Vec rms(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

Vec matvec(const std::vector<float>& w, const Vec& x, size_t rows) {
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < x.size(); ++c) y[r] += double(w[r * x.size() + c]) * x[c];
  return y;
}

void rope(Vec& v, size_t heads, size_t D, int64_t pos, double theta) {
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < D / 2; ++i) {
      const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(D));
      double& x0 = v[h * D + i];
      double& x1 = v[h * D + i + D / 2];
      const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x1 * std::cos(a) + x0 * std::sin(a);
      x0 = r0;
      x1 = r1;
    }
}

TEST(Eagle3Config, ReadsThePublishedLayout) {
  test::TempDir d;
  test::write_eagle3_head(d.dir.string(), {});
  const Eagle3Config c = load_eagle3_config(d.dir.string(), target());
  EXPECT_EQ(c.draft_vocab_size, 300);
  EXPECT_EQ(c.aux_layer_ids, (std::vector<int64_t>{0, 1, 2}));  // vLLM's (2, L/2, L-3), in layer order
  EXPECT_EQ(c.layer.num_attention_heads, 2);
  EXPECT_FALSE(c.norm_before_residual);
  Eagle3HeadSpec s;
  s.extra_config = {{"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {2, 0, 1}}}},
                    {"norm_before_residual", true}};
  test::write_eagle3_head(d.dir.string(), s);
  const Eagle3Config c2 = load_eagle3_config(d.dir.string(), target());
  EXPECT_EQ(c2.aux_layer_ids, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(c2.norm_before_residual);
}

TEST(Eagle3Config, RefusalsNameTheProblem) {
  auto refused = [](nlohmann::json extra, const std::string& want) {
    Eagle3HeadSpec s;
    s.extra_config = std::move(extra);
    const std::string e = load_error(s);
    EXPECT_NE(e.find(want), std::string::npos) << "got: " << e;
  };
  refused({{"vocab_size", 512}}, "must share the target's vocabulary");
  refused({{"num_hidden_layers", 2}}, "more than one layer are not implemented");
  refused({{"eagle_config", {{"use_aux_hidden_state", false}}}}, "eagle_config.use_aux_hidden_state = false");
  refused({{"architectures", {"Eagle3Speculator"}}}, "'Eagle3Speculator' is not an EAGLE-3 head we load");
  refused({{"eagle_aux_hidden_state_layer_ids", {1, 1, 2}}}, "three distinct layers");
  refused({{"eagle_aux_hidden_state_layer_ids", {0, 1, 3}}}, "three distinct layers");
  refused({{"draft_vocab_size", 800}}, "exceeds vocab_size");
  refused({{"hidden_size", 64}}, "differs from the target's 96");
}

TEST(Eagle3Head, CheckpointRefusals) {
  Eagle3HeadSpec bad_key;
  bad_key.extra_tensor = "midlayer.self_attn.q_norm.weight";
  EXPECT_NE(load_error(bad_key).find("tensor 'midlayer.self_attn.q_norm.weight' is not part"), std::string::npos);
  Eagle3HeadSpec no_d2t;
  no_d2t.with_d2t = false;
  EXPECT_NE(load_error(no_d2t).find("missing 'd2t'"), std::string::npos);
  Eagle3HeadSpec no_embedding;  // and no target table to share
  EXPECT_NE(load_error(no_embedding).find("no embed_tokens.weight"), std::string::npos);
  Eagle3HeadSpec full;  // draft vocabulary = the target's: d2t may be absent
  full.with_d2t = false;
  full.draft_vocab = 700;
  full.own_embedding = true;
  EXPECT_EQ(load_error(full), "");
}

// The head over 5 catch-up rows, then one row over the cached context, against plain loops.
TEST(Eagle3Head, ForwardEqualsADirectComputation) {
  test::TempDir dir;
  Eagle3HeadSpec s;
  s.own_embedding = true;
  s.extra_config = {{"norm_before_residual", true}};
  const test::Eagle3HeadWeights w = test::write_eagle3_head(dir.dir.string(), s);
  auto be = make_cpu_backend(1);
  Eagle3Head head(load_eagle3_config(dir.dir.string(), target()), *be);
  head.load(dir.dir.string(), nullptr);
  for (int64_t d = 0; d < s.draft_vocab; ++d) EXPECT_EQ(head.draft_to_target()[size_t(d)], d + w.d2t[size_t(d)]);

  const size_t H = size_t(s.hidden), D = size_t(s.head_dim), Hq = size_t(s.heads), Hkv = size_t(s.kv_heads);
  const std::vector<int32_t> tokens = {5, 77, 301, 699, 12, 40};
  const int64_t offset = 9;  // the sequence position of the head's index 0
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> hid(tokens.size() * H);
  for (auto& x : hid) x = u(rng);

  // Reference: every row's normed and prenorm states.
  const auto& f = w.f32;
  std::vector<Vec> ks, vs, normed, prenorm;
  for (size_t t = 0; t < tokens.size(); ++t) {
    Vec e(f.at("embed_tokens.weight").begin() + long(size_t(tokens[t]) * H),
          f.at("embed_tokens.weight").begin() + long((size_t(tokens[t]) + 1) * H));
    Vec h(hid.begin() + long(t * H), hid.begin() + long((t + 1) * H));
    Vec x = rms(e, f.at("midlayer.input_layernorm.weight"), s.eps);
    const Vec hn = rms(h, f.at("midlayer.hidden_norm.weight"), s.eps);
    x.insert(x.end(), hn.begin(), hn.end());
    Vec q = matvec(f.at("midlayer.self_attn.q_proj.weight"), x, Hq * D);
    Vec k = matvec(f.at("midlayer.self_attn.k_proj.weight"), x, Hkv * D);
    ks.push_back(k);
    vs.push_back(matvec(f.at("midlayer.self_attn.v_proj.weight"), x, Hkv * D));
    rope(q, Hq, D, offset + int64_t(t), s.rope_theta);
    rope(ks.back(), Hkv, D, offset + int64_t(t), s.rope_theta);
    Vec attn(Hq * D, 0.0);
    for (size_t hq = 0; hq < Hq; ++hq) {
      const size_t g = hq / (Hq / Hkv);
      std::vector<double> sc;
      double mx = -1e300;
      for (size_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (size_t i = 0; i < D; ++i) dot += q[hq * D + i] * ks[j][g * D + i];
        sc.push_back(dot / std::sqrt(double(D)));
        mx = std::max(mx, sc.back());
      }
      double z = 0;
      for (double& v : sc) z += (v = std::exp(v - mx));
      for (size_t j = 0; j <= t; ++j)
        for (size_t i = 0; i < D; ++i) attn[hq * D + i] += sc[j] / z * vs[j][g * D + i];
    }
    Vec res = hn;  // norm_before_residual
    const Vec o = matvec(f.at("midlayer.self_attn.o_proj.weight"), attn, H);
    for (size_t i = 0; i < H; ++i) res[i] += o[i];
    const Vec y = rms(res, f.at("midlayer.post_attention_layernorm.weight"), s.eps);
    const Vec g = matvec(f.at("midlayer.mlp.gate_proj.weight"), y, size_t(s.intermediate));
    const Vec up = matvec(f.at("midlayer.mlp.up_proj.weight"), y, size_t(s.intermediate));
    Vec act(g.size());
    for (size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1 + std::exp(-g[i])) * up[i];
    const Vec down = matvec(f.at("midlayer.mlp.down_proj.weight"), act, H);
    for (size_t i = 0; i < H; ++i) res[i] += down[i];
    prenorm.push_back(res);
    normed.push_back(rms(res, f.at("norm.weight"), s.eps));
  }

  // The head: rows 0..4 in one pass, then row 5 decoding over them.
  Tensor kv_all = be->empty({2, 1, 16, s.kv_heads, s.head_dim}, be->act_dtype());
  Tensor flat = kv_all.view({2, 16 * s.kv_heads * s.head_dim});
  LayerKVCache kv{
      flat.rows(0, 1).view({1, 16, s.kv_heads, s.head_dim}), flat.rows(1, 2).view({1, 16, s.kv_heads, s.head_dim}), {}};
  Sequence seq(1, tokens, SamplingParams{}, 16, 0);
  seq.block_table = {0};
  double worst = 0;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 5}, {5, 6}}) {
    seq.num_cached_tokens = begin;
    seq.num_scheduled_tokens = end - begin;
    ScheduledBatch b;
    b.seqs = {&seq};
    b.is_prefill = end - begin > 1;
    StepInputs in = ModelRunner::prepare(b, 16);
    for (auto& p : in.positions) p += int32_t(offset);
    const int64_t T = end - begin;
    Tensor ids = be->empty({T}, DType::I32), pos = be->empty({T}, DType::I32), h = be->empty({T, s.hidden}, DType::F32);
    be->upload(in.input_ids.data(), DType::I32, ids);
    be->upload(in.positions.data(), DType::I32, pos);
    be->upload(hid.data() + begin * s.hidden, DType::F32, h);
    const std::vector<float> h_before = be->to_host_f32(h);
    const Eagle3Head::Output out = head.forward(ids, pos, h, kv, in.md);
    EXPECT_EQ(be->to_host_f32(h), h_before) << "the input hidden states are not modified";
    const std::vector<float> got_n = be->to_host_f32(out.normed), got_p = be->to_host_f32(out.prenorm);
    for (int64_t t = 0; t < T; ++t)
      for (size_t i = 0; i < H; ++i) {
        worst = std::max(worst, std::abs(got_n[size_t(t) * H + i] - normed[size_t(begin + t)][i]));
        worst = std::max(worst, std::abs(got_p[size_t(t) * H + i] - prenorm[size_t(begin + t)][i]));
      }
    const std::vector<float> logits = be->to_host_f32(head.compute_logits(out.normed, {int32_t(T - 1)}));
    const Vec ref = matvec(f.at("lm_head.weight"), normed[size_t(end - 1)], size_t(s.draft_vocab));
    ASSERT_EQ(logits.size(), ref.size());
    for (size_t v = 0; v < ref.size(); ++v) worst = std::max(worst, std::abs(logits[v] - ref[v]));
  }
  EXPECT_LT(worst, 2e-4);
}

}  // namespace
