// RMSNorm (Qwen3RMSNorm): y = x / sqrt(mean(x^2) + eps) * w, and the fused residual form
// (residual += x; x = norm(residual)) that lets each decoder layer do one pass over memory.
// Under tensor parallelism (comm set) the x of the residual forms is the F32 partial sums of the
// row-parallel layer before (linear.h): the norm completes its all-reduce, fused with the add
// where the communicator can (Communicator::all_reduce_add_rms_norm), else as separate steps.
#pragma once
#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/communicator.h"
#include "nanovllm/layers/linear.h"

namespace nanovllm {

// A stream that may not be computed yet: proj(input), a row-parallel projection (o_proj, down_proj)
// left for the norm after it, so that a backend can run the residual add and the norm in the GEMM's
// epilogue (Backend::linear_add_rms_norm); or (proj null) input itself. run() computes it.
struct Deferred {
  const RowParallelLinear* proj = nullptr;
  Tensor input;
  Tensor run(Backend& be) const { return proj ? proj->forward(be, input) : input; }
};

struct RMSNorm {
  Tensor weight;  // [H]
  float eps = 1e-6f;
  Communicator* comm = nullptr;  // set: the residual forms' x are partial sums to all-reduce
  // The weight was folded into the projection after this norm (models/norm_fold.h: weight is now
  // all ones), so a backend may scale that product's rows by 1 / rms instead of normalizing its
  // input (Backend::linear_residual_rms_linear). Every other path computes the same with the ones.
  bool folded = false;

  void create(Backend& be, int64_t hidden, double eps_) {
    weight = be.empty({hidden}, be.weight_dtype());
    eps = float(eps_);
  }
  Tensor forward(Backend& be, const Tensor& x) const {
    Tensor out = be.empty(x.shape(), x.dtype());
    be.rms_norm(x, weight, eps, out);
    return out;
  }
  // residual += x; x = norm(residual) (x: [T, H], rebound to a new tensor under TP).
  void forward_residual(Backend& be, Tensor& x, Tensor& residual) const {
    if (comm && reduce_add_norm(be, x, residual)) return;
    be.add_rms_norm(x, residual, weight, eps);
  }
  // residual += x, then the projection that follows the norm: norm(residual) @ w^T ([T, N] for w
  // [N, K]), or with silu_mul the gated activation of w = [gate; up] ([T, I] for w [2I, K]). One
  // op, so a backend can fold the norm into the GEMM (x is spent: its contents are unspecified after).
  // Quantized weights (proj.weight_scales): add_rms_norm_linear_quantized (the backend may fold the
  // norm into its GEMV); under TP the all-reduce norm, then the GEMM (with the activation where the
  // backend fuses it: linear_silu_mul_quantized).
  Tensor forward_residual_linear(Backend& be, Tensor& x, Tensor& residual, const Linear& proj,
                                 bool silu_mul = false) const {
    if (proj.weight_scales.defined() && comm) {
      forward_residual(be, x, residual);
      return product(be, x, proj, silu_mul);
    }
    if (!proj.weight_scales.defined() && comm && reduce_add_norm(be, x, residual))  // x is now the normed stream
      return product(be, x, proj, silu_mul);
    Tensor out = be.empty({x.size(0), out_cols(proj, silu_mul)}, be.act_dtype());
    if (proj.weight_scales.defined())
      be.add_rms_norm_linear_quantized(x, residual, weight, eps, proj.weight, proj.weight_scales, out, silu_mul);
    else
      be.add_rms_norm_linear(x, residual, weight, eps, proj.weight, out, silu_mul);
    return out;
  }
  // The same three forms on a deferred stream d: where the backend takes the projection with the add
  // and the norm after it (one rank, d's weights unquantized and without bias), it runs that and the
  // next product on the normed stream; else d.run(), then the form above.
  Tensor forward_residual_linear(Backend& be, const Deferred& d, Tensor& residual, const Linear& proj,
                                 bool silu_mul = false) const {
    Tensor normed;
    if (Tensor out; folded_product(be, d, residual, proj, silu_mul, nullptr, out)) return out;
    if (!fold(be, d, residual, normed)) {
      Tensor x = d.run(be);
      return forward_residual_linear(be, x, residual, proj, silu_mul);
    }
    return product(be, normed, proj, silu_mul);
  }
  Tensor forward_residual_linear_rope(Backend& be, const Deferred& d, Tensor& residual, const Linear& proj,
                                      const Backend::QkNormRopeStore& r) const {
    Tensor normed;
    if (Tensor out; folded_product(be, d, residual, proj, false, &r, out)) return out;
    if (!fold(be, d, residual, normed)) {
      Tensor x = d.run(be);
      return forward_residual_linear_rope(be, x, residual, proj, r);
    }
    Tensor out = be.empty({normed.size(0), proj.weight.size(0)}, be.act_dtype());
    if (proj.weight_scales.defined()) {
      be.linear(normed, proj.weight, proj.weight_scales, out);
      be.qk_norm_rope_store(out, r);
    } else {
      be.linear_rope(normed, proj.weight, out, r);
    }
    return out;
  }
  // residual += d; returns norm(residual).
  Tensor forward_residual(Backend& be, const Deferred& d, Tensor& residual) const {
    Tensor normed;
    if (fold(be, d, residual, normed)) return normed;
    Tensor x = d.run(be);
    forward_residual(be, x, residual);
    return x;
  }

  // forward_residual_linear (no SiLU), then qk_norm_rope_store(r) on its output: the attention's
  // input projection (proj without bias). One op on one rank with unquantized weights, so that a
  // backend can fuse the norm + RoPE + KV store into the GEMM; else the two in turn.
  Tensor forward_residual_linear_rope(Backend& be, Tensor& x, Tensor& residual, const Linear& proj,
                                      const Backend::QkNormRopeStore& r) const {
    if (comm || proj.weight_scales.defined()) {
      Tensor out = forward_residual_linear(be, x, residual, proj);
      be.qk_norm_rope_store(out, r);
      return out;
    }
    Tensor out = be.empty({x.size(0), proj.weight.size(0)}, be.act_dtype());
    be.add_rms_norm_linear_rope(x, residual, weight, eps, proj.weight, out, r);
    return out;
  }

 private:
  static int64_t out_cols(const Linear& proj, bool silu_mul) {
    return silu_mul ? proj.weight.size(0) / 2 : proj.weight.size(0);
  }
  // The projection on a normed stream x: x @ w^T, or with silu_mul the gated activation of
  // w = [gate; up] (quantized or not, as proj holds it).
  static Tensor product(Backend& be, const Tensor& x, const Linear& proj, bool silu_mul) {
    Tensor out = be.empty({x.size(0), out_cols(proj, silu_mul)}, be.act_dtype());
    if (silu_mul)
      be.linear_silu_mul(x, proj.weight, proj.weight_scales, out);
    else
      be.linear(x, proj.weight, proj.weight_scales, out);
    return out;
  }
  // residual += d; normed = norm(residual), in d's GEMM where the backend can (false: nothing ran).
  bool fold(Backend& be, const Deferred& d, Tensor& residual, Tensor& normed) const {
    if (!d.proj) return false;
    const RowParallelLinear& p = *d.proj;
    if (comm || p.comm || p.weight_scales.defined() || p.bias.defined()) return false;
    Tensor out = be.empty({d.input.size(0), p.weight.size(0)}, be.act_dtype());
    if (!be.linear_add_rms_norm(d.input, p.weight, residual, weight, eps, out)) return false;
    normed = out;
    return true;
  }
  // folded: residual += d, then out = the projection of norm(residual) (its SiLU, or with rope its
  // q/k norm + RoPE + KV store), in the backend's op where it takes them (false: nothing ran).
  bool folded_product(Backend& be, const Deferred& d, Tensor& residual, const Linear& proj, bool silu_mul,
                      const Backend::QkNormRopeStore* rope, Tensor& out) const {
    if (!folded || !d.proj || comm || proj.weight_scales.defined() || (rope && proj.bias.defined())) return false;
    const RowParallelLinear& p = *d.proj;
    if (p.comm || p.weight_scales.defined() || p.bias.defined()) return false;
    Tensor o = be.empty({d.input.size(0), rope ? proj.weight.size(0) : out_cols(proj, silu_mul)}, be.act_dtype());
    if (!be.linear_residual_rms_linear(d.input, p.weight, residual, eps, proj.weight, o, silu_mul, rope)) return false;
    out = o;
    return true;
  }
  // Under TP: all-reduce the partial sums in x. True: fused with the add and norm (x rebound to
  // norm(residual)); false: x rebound to the reduced sum, for the caller's unfused add + norm.
  bool reduce_add_norm(Backend& be, Tensor& x, Tensor& residual) const {
    Tensor normed = be.empty(x.shape(), be.act_dtype());
    if (comm->all_reduce_add_rms_norm(x, residual, weight, eps, normed)) {
      x = normed;
      return true;
    }
    x = reduce_partial_sums(be, *comm, x);
    return false;
  }
};

}  // namespace nanovllm
