#!/usr/bin/env python3
"""A real-size model with random weights + Hugging Face bf16 reference logits (GPU machine).

    python3 scripts/make_qwen3_06b_reference.py --out DIR [--prompts 64] [--arch qwen3-0.6b]

--arch picks the shape (ARCHS below: Qwen3-0.6B by default, or Llama-3.1-8B, Qwen2.5-7B, ... for
the other model families, with their real configs); everything else is the same for every arch.

writes DIR/{config.json, generation_config.json, model.safetensors} (bf16), DIR/prompts.json
({"prompts": [[ids], ...]}) and DIR/ref_logits.f32 (raw float32, [num_prompts, vocab]: the
last-token logits of each prompt from transformers in bfloat16 on the GPU) and DIR/ref_logits_fp32.f32
(the same weights run in float32), DIR/long_prompts.json and DIR/long_ref_logits{,_fp32}.f32 (the
same for prompts of --long tokens, default 8,192 and 32,000), and DIR/layers_{bf16,fp32}.f32 (raw float32 [layers, 2, hidden]:
the residual stream of the last token of prompt --dump-prompt after each layer's attention add and
after the layer, for locating where an engine's error grows). The CUDA engine test
tests/gpu/test_hf_qwen3_06b.cpp compares against it (NANOVLLM_HF06B_DIR=DIR).
Embedding weights (and an untied LM head) get std 0.1 (other Linears 0.02, transformers' default) so
that top-1/top-2 logit margins are not dominated by bf16 rounding.
"""
import argparse
import json
import os
import random

import torch
import transformers

# name -> (config class, model class, config keywords): the published configs of each family.
ARCHS = {
    "qwen3-0.6b": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645)),
    "llama-3.1-8b": ("LlamaConfig", "LlamaForCausalLM", dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)),
    "llama-3.2-1b": ("LlamaConfig", "LlamaForCausalLM", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001)),
    "qwen2.5-7b": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
        use_sliding_window=False, tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151645)),
    "mistral-7b": ("MistralConfig", "MistralForCausalLM", dict(
        vocab_size=32768, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1000000.0,
        sliding_window=None, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)),
}


def dump_layers(model, prompt, path):
    """Last token's residual stream after each layer's attention add (the input of
    post_attention_layernorm) and after each layer (its output), as float32 [layers, 2, hidden]."""
    layers = model.model.layers
    got = torch.zeros(len(layers), 2, model.config.hidden_size)
    hooks = []
    for i, layer in enumerate(layers):
        def pre(mod, inp, i=i):
            got[i, 0] = inp[0][0, -1].float().cpu()
        def post(mod, inp, out, i=i):
            o = out[0] if isinstance(out, tuple) else out
            got[i, 1] = o[0, -1].float().cpu()
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(pre))
        hooks.append(layer.register_forward_hook(post))
    with torch.no_grad():
        model(input_ids=torch.tensor([prompt], device="cuda"))
    for h in hooks:
        h.remove()
    got.numpy().tofile(path)


def load(path, dtype, device="cuda"):
    """The checkpoint as transformers' users run it, with RoPE frequencies in float32 (those of a
    rotary module built afresh in float32 from the config, whatever the load did to the buffer)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    rot = model.model.rotary_emb
    fresh = type(rot)(config=model.config, device=device)
    rot.inv_freq = fresh.inv_freq.float()
    rot.original_inv_freq = rot.inv_freq
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--arch", default="qwen3-0.6b", choices=sorted(ARCHS), help="the model's shape")
    ap.add_argument("--dump-prompt", type=int, default=58, help="prompt whose per-layer stream is saved")
    ap.add_argument("--long", default="8192,32000",
                    help="lengths of the long prompts (long_prompts.json, long_ref_logits{,_fp32}.f32); '' for none")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    config_class, model_class, kw = ARCHS[args.arch]
    cfg = getattr(transformers, config_class)(**kw, torch_dtype="bfloat16")
    with torch.device("cuda"):
        model = getattr(transformers, model_class)(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 0.1)
        if not cfg.tie_word_embeddings:
            model.lm_head.weight.normal_(0.0, 0.1)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    # The reference runs the saved checkpoint loaded as a user would. (Not the in-memory model:
    # .to(bfloat16) also casts the rotary embedding's inv_freq buffer, which transformers keeps in
    # float32, and RoPE with BF16 frequencies drifts from the true model as positions grow: that
    # artefact made long prompts look ~10x further from float32 than they are.)
    del model
    model = load(args.out, torch.bfloat16)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": sorted({cfg.eos_token_id, cfg.bos_token_id}, reverse=True),
                   "bos_token_id": cfg.bos_token_id}, f)
    rng = random.Random(0)
    lens = [1, 2, 3, 7, 15, 16, 17, 31, 63, 64, 65, 97, 127, 128, 129, 255, 256, 257, 300, 511, 512, 513, 700, 1000,
            1023, 1024, 1025, 1500, 2047, 2048, 2049, 3000]
    while len(lens) < args.prompts:
        lens.append(rng.randint(1, 2500))
    lens = lens[: args.prompts]
    prompts = [[rng.randint(0, min(cfg.vocab_size - 1, 151000)) for _ in range(n)] for n in lens]
    out = torch.empty(len(prompts), cfg.vocab_size, dtype=torch.float32)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            ids = torch.tensor([p], device="cuda")
            out[i] = model(input_ids=ids).logits[0, -1].float().cpu()
    out.numpy().tofile(os.path.join(args.out, "ref_logits.f32"))
    dump_layers(model, prompts[args.dump_prompt], os.path.join(args.out, "layers_bf16.f32"))
    # The same weights computed in float32: a reference without bf16 rounding, to tell which of
    # two bf16 implementations is closer to the exact result.
    model = load(args.out, torch.float32)
    out32 = torch.empty_like(out)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            out32[i] = model(input_ids=torch.tensor([p], device="cuda")).logits[0, -1].float().cpu()
    out32.numpy().tofile(os.path.join(args.out, "ref_logits_fp32.f32"))
    dump_layers(model, prompts[args.dump_prompt], os.path.join(args.out, "layers_fp32.f32"))
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts, "torch": torch.__version__, "dump_prompt": args.dump_prompt}, f)
    top = out.topk(2, dim=-1).values
    print(f"wrote {len(prompts)} prompts; median top1-top2 margin {float((top[:, 0] - top[:, 1]).median()):.3f}")
    if args.long:
        write_long(args.out, [int(x) for x in args.long.split(",")], cfg.vocab_size, rng)


def write_long(out_dir, lens, vocab, rng):
    """Long prompts (8K, 32K tokens) with their last-token logits from transformers in bf16 (flash
    SDPA) and in float32 (memory-efficient SDPA), for tests/gpu/test_hf_qwen3_06b.cpp's long test."""
    prompts = [[rng.randint(0, min(vocab - 1, 151000)) for _ in range(n)] for n in lens]
    # float32 attention has no flash kernel: with GQA, SDPA would fall back to the math kernel and
    # materialize [heads, n, n] scores (61 GiB at 32K). Without GQA in SDPA (transformers repeats K/V)
    # the memory-efficient kernel takes float32. If it still fails, that prompt's float32 logits are
    # NaN and the test uses a fixed margin instead of the measured bf16 noise.
    try:
        import transformers.integrations.sdpa_attention as sdpa_integration
        sdpa_integration.use_gqa_in_sdpa = lambda *args, **kwargs: False
    except (ImportError, AttributeError):
        pass
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for dtype, name in ((torch.bfloat16, "long_ref_logits.f32"), (torch.float32, "long_ref_logits_fp32.f32")):
        model = load(out_dir, dtype)
        out = torch.full((len(prompts), vocab), float("nan"), dtype=torch.float32)
        backends = [SDPBackend.EFFICIENT_ATTENTION] if dtype == torch.float32 else [SDPBackend.FLASH_ATTENTION]
        with torch.no_grad(), sdpa_kernel(backends):
            for i, p in enumerate(prompts):
                try:
                    ids = torch.tensor([p], device="cuda")
                    out[i] = model(input_ids=ids, logits_to_keep=1).logits[0, -1].float().cpu()
                except (torch.OutOfMemoryError, RuntimeError) as e:
                    if dtype == torch.bfloat16:
                        raise
                    print(f"float32 reference of the {len(p)}-token prompt failed ({type(e).__name__}); left NaN")
                    torch.cuda.empty_cache()
        out.numpy().tofile(os.path.join(out_dir, name))
        del model
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "long_prompts.json"), "w") as f:
        json.dump({"prompts": prompts}, f)
    print(f"wrote {len(prompts)} long prompts of {lens} tokens")


if __name__ == "__main__":
    main()
