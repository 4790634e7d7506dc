#!/usr/bin/env python3
"""The transformers peer of `nanovllm bench --embed`: embeddings of the same inputs (Python
random.seed(0), randint(0, 10000) ids, --inputs of --len tokens) with a batched bf16 forward
(AutoModel, SDPA attention) and last-token pooling + L2 normalization, as Qwen3-Embedding's
sentence-transformers pipeline computes them. Prints one JSON line: inputs/s and tokens/s.

    python3 scripts/bench_embed_transformers.py --model DIR [--inputs 1000 --len 512 --batch 64]

With --model unset, a Qwen3-0.6B-shaped model with random weights (the shape of the issue's
benchmark; `nanovllm bench --embed --model qwen3-0.6b --load-format dummy` is the same network).
All inputs have the same length, so there is no padding and the last token is the last position."""
import argparse
import json
import random
import time

import torch
from transformers import AutoModel, Qwen3Config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="")
    ap.add_argument("--inputs", type=int, default=1000)
    ap.add_argument("--len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    if a.model:
        model = AutoModel.from_pretrained(a.model, dtype=torch.bfloat16, attn_implementation="sdpa")
    else:
        cfg = Qwen3Config(vocab_size=151936, hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
                          head_dim=128, intermediate_size=3072, num_hidden_layers=28, max_position_embeddings=40960,
                          rope_theta=1e6, attn_implementation="sdpa")
        model = AutoModel.from_config(cfg, dtype=torch.bfloat16)
    model = model.cuda().eval()
    rng = random.Random(0)
    vocab = model.config.vocab_size
    ids = [[rng.randint(0, min(10000, vocab - 1)) for _ in range(a.len)] for _ in range(a.inputs)]
    data = torch.tensor(ids, device="cuda")

    def run(rows):
        out = []
        with torch.no_grad():
            for i in range(0, rows.shape[0], a.batch):
                h = model(input_ids=rows[i:i + a.batch]).last_hidden_state[:, -1].float()
                out.append(torch.nn.functional.normalize(h, dim=-1))
        torch.cuda.synchronize()
        return out

    run(data[:min(a.inputs, 2 * a.batch)])  # warm-up
    t0 = time.perf_counter()
    run(data)
    s = time.perf_counter() - t0
    print(json.dumps({"mode": "transformers_embed", "inputs": a.inputs, "input_len": a.len, "batch": a.batch,
                      "seconds": s, "inputs_per_s": a.inputs / s, "tokens_per_s": a.inputs * a.len / s,
                      "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
