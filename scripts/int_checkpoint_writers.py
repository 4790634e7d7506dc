"""Quantizers and packers of the group-quantized checkpoint formats (for make_quantized_checkpoint.py).

One Linear weight w [N, K] (out x in, float) becomes the tensors its format stores for it, named
relative to the module (e.g. "qweight" for model.layers.0.self_attn.q_proj.qweight), and
quantization_config() gives the format's config.json entry. Each quantizer follows its project's own
rule (min/max, round to nearest: what the real tools do without calibration); each packer its
project's packer:

  AWQ (AutoAWQ WQLinear_GEMM, version "gemm", 4 bits, zero points): scale = (max - min) / 15 per group
    (F16), zero = clamp(-round(min / scale), 0, 15); qweight I32 [K, N/8] and qzeros I32 [K/G, N/8]
    packed along N, the 8 nibbles of a word (low to high) holding columns 0, 2, 4, 6, 1, 3, 5, 7 of
    its 8; scales F16 [K/G, N].
  GPTQ (AutoGPTQ / GPTQModel, checkpoint_format "gptq" = v1, 4 or 8 bits): min/max widened to include
    0; sym: scale = 2 * amax / (2^b - 1), zero = 2^(b-1); asym: scale = (max - min) / (2^b - 1),
    zero = round(-min / scale). qweight I32 [K*b/32, N] packed along K (word r holds k = r*32/b + i
    in bits [i*b, (i+1)*b)); qzeros I32 [K/G, N*b/32] packed along N, storing zero - 1; scales F16
    [K/G, N]; g_idx I32 [K] the group of each input column. desc_act: the columns are grouped in a
    random order (GPTQ's act order sorts them by the Hessian's diagonal), g_idx[perm[i]] = i / G.
  compressed-tensors (llm-compressor, format "pack-quantized", W4A16 / W8A16): codes signed in
    [-2^(b-1), 2^(b-1) - 1]; sym: scale = amax / ((2^b - 1) / 2); asym: scale = (max - min) /
    (2^b - 1), zero_point = round(-2^(b-1) - min / scale). Stored + 2^(b-1): weight_packed I32
    [N, K*b/32] packed along K; weight_zero_point I32 [N*b/32, K/G] packed along N (asym only);
    weight_scale [N, K/G] (channel: [N, 1]) in the model's dtype; weight_shape I64 [2]; weight_g_idx
    I32 [K] with actorder "group". "float-quantized" FP8 W8A8 dynamic: weight F8_E4M3 [N, K],
    weight_scale [N, 1] = amax / 448 per output channel, activations quantized per token at run time.
Every format's codes are computed from the scale as stored (F16 / the model's dtype), so that the
reference (int_checkpoint_readers.py, written from the formats' specifications, independently of
this file) dequantizes exactly the values the engine is given.
"""
import dataclasses

import torch

AWQ_NIBBLE_COLUMNS = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ's order_map: nibble i holds column AWQ_NIBBLE_COLUMNS[i]


@dataclasses.dataclass(frozen=True)
class Scheme:
    fmt: str  # "awq", "gptq" or "compressed-tensors"
    bits: int = 4
    group: int = 128  # -1: one group per row (channel-wise)
    sym: bool = True
    desc_act: bool = False  # GPTQ desc_act, compressed-tensors actorder "group"
    fp8: bool = False  # compressed-tensors float-quantized FP8 W8A8 (bits, group, sym unused)

    def check(self):
        if self.fmt not in ("awq", "gptq", "compressed-tensors"):
            raise ValueError(f"unknown format {self.fmt!r}")
        if self.fp8:
            if self.fmt != "compressed-tensors":
                raise ValueError("--fp8 is compressed-tensors' float-quantized scheme only")
            return
        if self.bits not in (4, 8):
            raise ValueError(f"bits {self.bits}: 4 or 8")
        if self.fmt == "awq" and (self.bits != 4 or self.sym or self.desc_act):
            raise ValueError("AWQ (GEMM) is 4 bits with zero points (--asym), no act order")
        if self.group != -1 and (self.group <= 0 or self.group % 2):
            raise ValueError(f"group size {self.group}: a positive even number or -1")

    def name(self):
        if self.fp8:
            return "compressed-tensors fp8 (W8A8 dynamic, per-channel)"
        g = "channel" if self.group == -1 else f"group {self.group}"
        return (f"{self.fmt} {self.bits}-bit {g} {'sym' if self.sym else 'asym'}"
                f"{' act-order' if self.desc_act else ''}")


def _group_index(k, group, desc_act, gen):
    """g_idx [K] (int64): the group of each input column; act order groups a random permutation."""
    g = k if group == -1 else group
    if k % g:
        raise ValueError(f"group size {g} does not divide the input size {k}")
    idx = torch.arange(k) // g
    if not desc_act:
        return idx
    perm = torch.randperm(k, generator=gen)
    out = torch.empty(k, dtype=torch.int64)
    out[perm] = idx
    return out


def _group_min_max(w, g_idx, ngroups):
    """min and max of w [N, K] over the columns of each group -> [N, ngroups] each."""
    order = torch.argsort(g_idx, stable=True)
    wg = w[:, order].reshape(w.shape[0], ngroups, -1)
    return wg.amin(dim=2), wg.amax(dim=2)


def quantize_int(w, scheme, scale_dtype, gen):
    """w [N, K] float -> (codes [N, K] int64 in [0, 2^b), scale [N, ng] as stored (scale_dtype),
    zero [N, ng] int64 in code units, g_idx [K]): the format's rule, round to nearest."""
    n, k = w.shape
    w = w.float()
    maxq = 2 ** scheme.bits - 1
    g_idx = _group_index(k, scheme.group, scheme.desc_act, gen).to(w.device)
    ng = int(g_idx.max()) + 1
    mn, mx = _group_min_max(w, g_idx, ng)
    if scheme.fmt == "awq":  # AutoAWQ pseudo_quantize_tensor (zero_point=True)
        scale = ((mx - mn).clamp(min=1e-5) / maxq).to(scale_dtype)
        zero = (-torch.round(mn / scale.float())).clamp(0, maxq)
    else:
        mn, mx = mn.clamp(max=0), mx.clamp(min=0)  # both tools keep 0 representable
        if scheme.fmt == "gptq":  # AutoGPTQ Quantizer.find_params
            both_zero = (mn == 0) & (mx == 0)
            mn, mx = torch.where(both_zero, -1.0, mn), torch.where(both_zero, 1.0, mx)
            if scheme.sym:
                amax = torch.maximum(-mn, mx)
                scale32 = 2 * amax / maxq
                zero = torch.full_like(scale32, (maxq + 1) // 2)
            else:
                scale32 = (mx - mn) / maxq
                zero = torch.round(-mn / scale32)
            scale = scale32.to(scale_dtype)
        else:  # compressed-tensors calculate_qparams (zero in signed units, shifted by 2^(b-1))
            half = 2 ** (scheme.bits - 1)
            eps = torch.finfo(torch.float32).eps
            if scheme.sym:
                scale = (torch.maximum(-mn, mx) / (maxq / 2)).clamp(min=eps).to(scale_dtype)
                zero = torch.full_like(mn, half)
            else:
                scale = ((mx - mn) / maxq).clamp(min=eps).to(scale_dtype)
                zero = torch.round(-half - mn / scale.float()).clamp(-half, half - 1) + half
    s = scale.float()[:, g_idx]
    codes = (torch.round(w / s) + zero[:, g_idx]).clamp(0, maxq)
    return codes.to(torch.int64), scale, zero.to(torch.int64), g_idx


def _to_i32(words):
    """int64 words holding 32-bit patterns -> int32 (two's complement), as the packers' numpy view."""
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def _pack(values, bits, dim, columns=None):
    """Packs int64 codes [R, C] along `dim`, 32/bits per word, value j of a word (low bits first)
    being the j-th of its run (or columns[j] of its run of 8: AWQ's interleave)."""
    per = 32 // bits
    if values.shape[dim] % per:
        raise ValueError(f"a dimension of {values.shape[dim]} cannot be packed {per} to a word")
    order = columns or range(per)
    words = torch.zeros(values.shape[0] // per if dim == 0 else values.shape[0],
                        values.shape[1] // per if dim == 1 else values.shape[1], dtype=torch.int64,
                        device=values.device)
    for j, src in enumerate(order):
        part = values[src::per, :] if dim == 0 else values[:, src::per]
        words |= part << (bits * j)
    return _to_i32(words)


def pack_linear(w, scheme, model_dtype, gen):
    """The tensors (names relative to the module) that scheme's format stores for w [N, K]."""
    if scheme.fp8:
        amax = w.float().abs().amax(dim=1, keepdim=True)
        scale = (amax / 448.0).clamp(min=torch.finfo(torch.float32).eps).to(model_dtype)
        codes = (w.float() / scale.float()).clamp(-448, 448).to(torch.float8_e4m3fn)
        return {"weight": codes.contiguous(), "weight_scale": scale.contiguous()}
    scale_dtype = torch.float16 if scheme.fmt in ("awq", "gptq") else model_dtype
    codes, scale, zero, g_idx = quantize_int(w, scheme, scale_dtype, gen)
    b = scheme.bits
    if scheme.fmt == "awq":
        return {"qweight": _pack(codes.t(), 4, 1, AWQ_NIBBLE_COLUMNS),
                "qzeros": _pack(zero.t(), 4, 1, AWQ_NIBBLE_COLUMNS),
                "scales": scale.t().contiguous()}
    if scheme.fmt == "gptq":
        if int(zero.min()) < 1:  # v1 stores zero - 1; 0 would wrap into the neighbours' bits
            raise ValueError("a GPTQ v1 zero point of 0 cannot be stored (a group with no negative weight)")
        return {"qweight": _pack(codes.t(), b, 0), "qzeros": _pack((zero - 1).t(), b, 1),
                "scales": scale.t().contiguous(), "g_idx": g_idx.to(torch.int32).cpu()}
    out = {"weight_packed": _pack(codes, b, 1), "weight_scale": scale.contiguous(),
           "weight_shape": torch.tensor(list(w.shape), dtype=torch.int64)}
    if not scheme.sym:
        out["weight_zero_point"] = _pack(zero, b, 0)
    if scheme.desc_act:
        out["weight_g_idx"] = g_idx.to(torch.int32).cpu()
    return out


def quantization_config(scheme):
    """config.json's quantization_config as the format's tool writes it."""
    if scheme.fmt == "awq":
        return {"quant_method": "awq", "zero_point": True, "group_size": scheme.group, "bits": 4,
                "version": "gemm", "modules_to_not_convert": None}
    if scheme.fmt == "gptq":
        return {"quant_method": "gptq", "bits": scheme.bits, "group_size": scheme.group,
                "desc_act": scheme.desc_act, "sym": scheme.sym, "damp_percent": 0.01, "static_groups": False,
                "true_sequential": True, "checkpoint_format": "gptq", "model_name_or_path": None,
                "model_file_base_name": None}
    common = {"actorder": None, "block_structure": None, "observer_kwargs": {}, "symmetric": True}
    if scheme.fp8:
        fmt = "float-quantized"
        weights = dict(common, num_bits=8, type="float", strategy="channel", group_size=None, dynamic=False,
                       observer="minmax")
        acts = dict(common, num_bits=8, type="float", strategy="token", group_size=None, dynamic=True,
                    observer=None)
    else:
        fmt = "pack-quantized"
        channel = scheme.group == -1
        weights = dict(common, num_bits=scheme.bits, type="int", symmetric=scheme.sym, dynamic=False,
                       strategy="channel" if channel else "group", group_size=None if channel else scheme.group,
                       actorder="group" if scheme.desc_act else None, observer="minmax")
        acts = None
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "global_compression_ratio": None, "ignore": ["lm_head"], "kv_cache_scheme": None,
            "sparsity_config": {},
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": acts,
                                          "output_activations": None, "format": fmt}}}
