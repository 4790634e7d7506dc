"""The reference dequantization of AWQ, GPTQ and compressed-tensors checkpoints, from the formats'
specifications (for make_quantized_checkpoint.py's reference logits).

dequantize_checkpoint(tensors, quantization_config) takes every tensor of a checkpoint as read from
disk and returns a plain state dict: each quantized Linear's tensors replaced by its float32 weight
[N, K] = dequantized values, every other tensor as stored. Written from what each format means, not
from the packer beside it (int_checkpoint_writers.py), so that a packing mistake there shows up as
a reference the engine cannot match:

  AWQ GEMM: a word of qweight [K, N/8] / qzeros [K/G, N/8] covers output columns 8c .. 8c + 7; AutoAWQ
    packs them interleaved, so that column j of the eight is nibble 4 * (j % 2) + j / 2 (its
    AWQ_REVERSE_ORDER 0, 4, 1, 5, 2, 6, 3, 7). W[n][k] = (q[k][n] - z[k/G][n]) * scales[k/G][n].
  GPTQ (v1 / v2): qweight [K*b/32, N]: input column k is field k % (32/b) of word row k / (32/b);
    qzeros [K/G, N*b/32]: output column n is field n % (32/b) of word column n / (32/b), holding
    zero - 1 in v1 ("gptq"), zero in v2; W[n][k] = (q[k][n] - z[g][n]) * scales[g][n], g = g_idx[k].
  compressed-tensors pack-quantized: weight_packed [N, K*b/32]: column k is field k % (32/b) of word
    k / (32/b), stored value + 2^(b-1) (a signed code); weight_zero_point [N*b/32, ng] likewise along
    N (asymmetric only; else 0); W[n][k] = (q - zp[n][g]) * weight_scale[n][g], g = weight_g_idx[k] or
    k / (K / ng). float-quantized: W = weight (E4M3) * weight_scale [N, 1].
"""
import torch


def _fields(words, bits):
    """int32 words [...] -> their 32/bits unsigned fields [..., 32/bits], lowest bits first."""
    u = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, bits, dtype=torch.int64)
    return (u.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)


def _awq_columns(words):
    """AWQ GEMM words [R, N/8] -> codes [R, N] in column order."""
    f = _fields(words, 4)  # [R, N/8, nibble]
    nibble_of_column = torch.tensor([4 * (j % 2) + j // 2 for j in range(8)])
    return f[:, :, nibble_of_column].reshape(words.shape[0], -1)


def _dequantize_awq(t, qc):
    if qc.get("version", "gemm").lower() != "gemm" or qc.get("bits", qc.get("w_bit", 4)) != 4:
        raise ValueError(f"reference: AWQ {qc} is not version gemm, 4 bits")
    q = _awq_columns(t["qweight"])  # [K, N]
    z = _awq_columns(t["qzeros"])  # [K/G, N]
    s = t["scales"].float()
    group = q.shape[0] // s.shape[0]
    g = torch.arange(q.shape[0]) // group
    return ((q - z[g]).float() * s[g]).t()


def _dequantize_gptq(t, qc):
    bits = qc["bits"]
    per = 32 // bits
    fq = _fields(t["qweight"], bits)  # [K/per, N, per]: k = row * per + field
    q = fq.permute(0, 2, 1).reshape(-1, fq.shape[1])  # [K, N]
    z = _fields(t["qzeros"], bits).reshape(t["qzeros"].shape[0], -1)  # [ng, N]
    if qc.get("checkpoint_format", "gptq") == "gptq":
        z = z + 1
    s = t["scales"].float()
    k = q.shape[0]
    if "g_idx" in t:
        g = t["g_idx"].to(torch.int64)
    else:
        g = torch.arange(k) // (k // s.shape[0])
    return ((q - z[g]).float() * s[g]).t()


def _dequantize_ct_int(t, args):
    bits = args["num_bits"]
    half = 1 << (bits - 1)
    n, k = (int(x) for x in t["weight_shape"].tolist())
    q = _fields(t["weight_packed"], bits).reshape(n, -1)[:, :k] - half  # signed codes [N, K]
    s = t["weight_scale"].float()  # [N, ng]
    if "weight_zero_point" in t:
        zf = _fields(t["weight_zero_point"], bits)  # [N/per, ng, per]: n = row * per + field
        zp = zf.permute(0, 2, 1).reshape(-1, s.shape[1])[:n] - half
    else:
        if not args.get("symmetric", True):
            raise ValueError("reference: asymmetric compressed-tensors weight without weight_zero_point")
        zp = torch.zeros_like(s, dtype=torch.int64)
    if "weight_g_idx" in t:
        g = t["weight_g_idx"].to(torch.int64)
    else:
        g = torch.arange(k) // (k // s.shape[1])
    return (q - zp[:, g]).float() * s[:, g]


MODULE_TENSORS = {  # the tensors that mark (and make up) a quantized module, per format
    "awq": ("qweight", ("qweight", "qzeros", "scales")),
    "gptq": ("qweight", ("qweight", "qzeros", "scales", "g_idx")),
    "pack-quantized": ("weight_packed",
                       ("weight_packed", "weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx")),
    "float-quantized": ("weight_scale", ("weight", "weight_scale")),
}


def dequantize_checkpoint(tensors, qc):
    """{name: tensor} of a quantized checkpoint -> plain state dict (quantized Linears as float32)."""
    method = qc["quant_method"]
    if method == "compressed-tensors":
        kind = qc["format"]
        groups = list(qc["config_groups"].values())
        if len(groups) != 1 or groups[0].get("input_activations") and kind != "float-quantized":
            raise ValueError(f"reference: compressed-tensors config_groups {qc['config_groups']} not handled")
        args = groups[0]["weights"]
    else:
        kind, args = method, qc
    marker, parts = MODULE_TENSORS[kind]
    modules = [name[: -len(marker) - 1] for name in tensors if name.endswith("." + marker)]
    out = dict(tensors)
    for m in modules:
        t = {p: out.pop(f"{m}.{p}") for p in parts if f"{m}.{p}" in out}
        if kind == "awq":
            w = _dequantize_awq(t, args)
        elif kind == "gptq":
            w = _dequantize_gptq(t, args)
        elif kind == "pack-quantized":
            w = _dequantize_ct_int(t, args)
        else:
            w = t["weight"].float() * t["weight_scale"].float()
        out[m + ".weight"] = w.contiguous()
    if not modules:
        raise ValueError(f"reference: no {marker} tensor in the checkpoint")
    print(f"reference: dequantized {len(modules)} {kind} Linears")
    return out
