"""Where our layer-0 attention output departs from transformers' (diagnostic).

Reads DIR (scripts/make_qwen3_06b_reference.py --out DIR) and DIR/layer0_attn_<device>.f32, our
residual stream after layer 0's attention add for every token of the dump prompt (written by
gpu_tests --gtest_filter=HFQwen3_06B.PerLayer* with NANOVLLM_HF06B_DUMP=DIR). Runs transformers
in float32 on the same weights under a few variants and prints, per variant, the cosine with ours
by token position: the variant that matches, and the position where a mismatch starts, name the
semantic difference.
Usage: python3 scripts/compare_layer0.py DIR [cpu|cuda]
"""
import json
import sys

import numpy as np
import torch
from transformers import Qwen3ForCausalLM


def layer0_attn(model, prompt):
    got = {}
    h = model.model.layers[0].post_attention_layernorm.register_forward_pre_hook(
        lambda mod, inp: got.__setitem__("x", inp[0][0].float().cpu()))
    with torch.no_grad():
        model(input_ids=torch.tensor([prompt], device="cuda"))
    h.remove()
    return got["x"].numpy()


def main():
    d, dev = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "cpu")
    j = json.load(open(f"{d}/prompts.json"))
    prompt = j["prompts"][j["dump_prompt"]]
    T = len(prompt)
    ours = np.fromfile(f"{d}/layer0_attn_{dev}.f32", dtype=np.float32).reshape(T, -1)
    print("config:", open(f"{d}/config.json").read().replace("\n", " ")[:600])
    variants = {
        "sdpa fp32": dict(attn_implementation="sdpa"),
        "eager fp32": dict(attn_implementation="eager"),
        "eager fp32 rope_theta=1e4": dict(attn_implementation="eager", rope_theta=1e4),
    }
    emb = None
    for name, kw in variants.items():
        theta = kw.pop("rope_theta", None)
        model = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32, **kw).cuda().eval()
        if theta is not None:
            rot = model.model.rotary_emb
            dim = model.config.head_dim
            inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device="cuda") / dim))
            rot.inv_freq = inv
            rot.original_inv_freq = inv
        ref = layer0_attn(model, prompt)
        if emb is None:
            emb = model.model.embed_tokens.weight.detach()[torch.tensor(prompt, device="cuda")].float().cpu().numpy()
        a, b = ours - emb, ref - emb  # the attention output alone (the embedding is exact on both)
        cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
        rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
        marks = [0, 1, 2, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 257, 511, 512, 1023, 1024, 2047, 2048, T - 1]
        print(f"{name}: attention output, ours vs transformers, by position")
        print("   " + "  ".join(f"{p}:{cos[p]:.5f}/{rel[p]:.3f}" for p in marks if p < T))
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
