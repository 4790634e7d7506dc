#!/usr/bin/env python3
"""A random Qwen3 checkpoint in the format of Qwen's Qwen3-*-FP8 releases, for benchmarks.

    python3 scripts/make_dummy_fp8_checkpoint.py --out DIR [--size 8b|0.6b|1.7b] [--device cuda]

`--load-format dummy` quantizes a preset's random weights per output channel, so it cannot time the
path a real FP8 checkpoint takes (128 x 128 block scales: cuBLASLt's VEC128 FP8 GEMM in prefills,
the block-scaled GEMV in decode). This writes such a checkpoint without transformers: DIR/config.json
(the preset's shape, quantization_config {quant_method fp8, fmt e4m3, activation_scheme dynamic,
weight_block_size [128, 128]}), one safetensors shard per decoder layer plus one for the rest, and
model.safetensors.index.json. Each decoder projection is drawn as N(0, 0.02) in BF16 and quantized
per 128 x 128 block as transformers' FineGrainedFP8 does (scale = amax / 448, stored as
weight_scale_inv; codes E4M3); embeddings, norms and lm_head stay BF16. No tokenizer: use it with
`nanovllm bench --model DIR` (token ids only). Qwen3-8B: ~9.5 GB, about a minute on a GPU machine.
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

SIZES = {  # hidden, intermediate, layers, heads, kv heads, tied embeddings (models/presets.cpp)
    "0.6b": (1024, 3072, 28, 16, 8, True),
    "1.7b": (2048, 6144, 28, 16, 8, True),
    "8b": (4096, 12288, 36, 32, 8, False),
}
VOCAB, HEAD_DIM, BLOCK = 151936, 128, 128


def quantize_blocks(w):
    """[N, K] float -> (E4M3 codes [N, K], F32 scales [ceil(N/128), ceil(K/128)]), amax / 448 per block."""
    n, k = w.shape
    bn, bk = (n + BLOCK - 1) // BLOCK, (k + BLOCK - 1) // BLOCK
    padded = torch.zeros(bn * BLOCK, bk * BLOCK, dtype=torch.float32, device=w.device)
    padded[:n, :k] = w.float()
    blocks = padded.view(bn, BLOCK, bk, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    codes = (blocks / scale[:, None, :, None]).view(bn * BLOCK, bk * BLOCK)[:n, :k]
    return codes.to(torch.float8_e4m3fn).contiguous(), scale.contiguous()


def preset_config(size):
    """config.json of a Qwen3 preset's shape (no quantization_config)."""
    hidden, inter, layers, heads, kv_heads, tied = SIZES[size]
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": tied,
        "vocab_size": VOCAB,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    }


def write_dummy(out, config, quantize, quantization_config, device, seed=0):
    """Streams a random checkpoint of config's shape (a Qwen3 or Llama config.json) into out, one
    decoder layer at a time: each projection drawn as N(0, 0.02) in BF16 on `device` and turned into
    its stored tensors by quantize(w) -> {suffix: tensor} (e.g. {"weight": codes, "weight_scale_inv":
    scales}); norms ones, embeddings (and an untied lm_head) N(0, 0.02) in BF16. Also used by
    make_quantized_checkpoint.py --dummy-config."""
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator(device=device).manual_seed(seed)

    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=gen, device=device) * std).to(torch.bfloat16)

    weight_map = {}

    def save(tensors, name):
        save_file({k: v.cpu() for k, v in tensors.items()}, os.path.join(out, name))
        weight_map.update({k: name for k in tensors})

    projections = {
        "self_attn.q_proj": (heads * head_dim, hidden),
        "self_attn.k_proj": (kv_heads * head_dim, hidden),
        "self_attn.v_proj": (kv_heads * head_dim, hidden),
        "self_attn.o_proj": (hidden, heads * head_dim),
        "mlp.gate_proj": (inter, hidden),
        "mlp.up_proj": (inter, hidden),
        "mlp.down_proj": (hidden, inter),
    }
    norms = {"input_layernorm": hidden, "post_attention_layernorm": hidden}
    if config["model_type"] == "qwen3":
        norms.update({"self_attn.q_norm": head_dim, "self_attn.k_norm": head_dim})
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t = {p + n + ".weight": torch.ones(size, dtype=torch.bfloat16) for n, size in norms.items()}
        for name, shape in projections.items():
            t.update({f"{p}{name}.{k}": v for k, v in quantize(normal(*shape)).items()})
        save(t, f"model-layer-{i:03d}.safetensors")
    vocab = config["vocab_size"]
    rest = {
        "model.embed_tokens.weight": normal(vocab, hidden),
        "model.norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
    }
    if not config.get("tie_word_embeddings", False):
        rest["lm_head.weight"] = normal(vocab, hidden)
    save(rest, "model-rest.safetensors")
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(config, quantization_config=quantization_config), f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="8b", choices=sorted(SIZES))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    def fp8(w):
        codes, scale = quantize_blocks(w)
        return {"weight": codes, "weight_scale_inv": scale}

    qc = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}
    write_dummy(args.out, preset_config(args.size), fp8, qc, args.device, args.seed)
    print(f"wrote {args.out}: Qwen3-{args.size} shape, {SIZES[args.size][2]} layers, FP8 128 x 128 blocks")


if __name__ == "__main__":
    main()
