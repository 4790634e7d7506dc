#!/usr/bin/env python3
"""The peer of `nanovllm bench --latency` for time to first token (GPU machine): one Hugging Face
transformers forward in bf16 (cuBLAS GEMMs + PyTorch's SDPA attention) over a prompt of N tokens,
`model(input_ids, logits_to_keep=1)`, median of 3 after a warm-up, with random weights of a preset's
config (the same shapes as our --load-format dummy). Also times PyTorch's SDPA kernel alone on the
prompt's causal attention shape and torch.matmul at the layers' prefill GEMM shapes (the peers of
bench/prefill_bench.cpp). One JSON line per figure.

    python3 scripts/ttft_transformers.py --model qwen3-0.6b|qwen3-8b [--lens 1024,8192,32000]
        [--kernels-only | --no-sdpa]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from transformers import Qwen3Config, Qwen3ForCausalLM

# The real configs (as src/nanovllm/config/config.cpp's presets).
PRESETS = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}


def median_time(fn, reps=3):
    fn()  # warm-up
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b", choices=sorted(PRESETS))
    ap.add_argument("--lens", default="1024,8192,32000")
    ap.add_argument("--kernels-only", action="store_true",
                    help="only the SDPA and matmul kernel timings (no model)")
    ap.add_argument("--no-sdpa", action="store_true", help="only the model forward")
    args = ap.parse_args()
    lens = [int(x) for x in args.lens.split(",")]
    cfg = Qwen3Config(vocab_size=151936, max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                      **PRESETS[args.model])
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = None
    if not args.kernels_only:
        with torch.device("cuda"):
            model = Qwen3ForCausalLM(cfg).to(torch.bfloat16).eval()
    hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    for n in lens:
        if model is not None:
            ids = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
            with torch.no_grad():
                sec = median_time(lambda: model(input_ids=ids, logits_to_keep=1))
            print(json.dumps({"bench": "ttft_transformers", "model": args.model, "prompt_tokens": n,
                              "ttft_ms_median": round(sec * 1e3, 2), "torch": torch.__version__}), flush=True)
        if args.no_sdpa:
            continue
        q = torch.randn(1, hq, n, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, hkv, n, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, hkv, n, d, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            sec = median_time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), reps=5)
        flops = 4.0 * d * hq * n * (n + 1) / 2
        print(json.dumps({"bench": "sdpa_torch", "model": args.model, "hq": hq, "hkv": hkv, "d": d, "tokens": n,
                          "ms": round(sec * 1e3, 3), "tflops": round(flops / sec / 1e12, 1)}), flush=True)
        del q, k, v
    if args.kernels_only:
        time_matmuls(args.model, cfg)
    del model
    torch.cuda.empty_cache()


def time_matmuls(name, cfg):
    """torch.matmul (cuBLAS) at the layers' prefill shapes: the peer of prefill_bench's GEMMs."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    qkv = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim
    shapes = {"qkv": (qkv, h), "o": (h, cfg.num_attention_heads * cfg.head_dim), "gate_up": (2 * i, h),
              "down": (h, i)}
    for m in (4096, 16384):
        for layer, (n, k) in shapes.items():
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            sec = median_time(lambda: x @ w.t(), reps=20)
            print(json.dumps({"bench": "matmul_torch", "model": name, "layer": layer, "m": m, "n": n, "k": k,
                              "ms": round(sec * 1e3, 3), "tflops": round(2.0 * m * n * k / sec / 1e12, 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
