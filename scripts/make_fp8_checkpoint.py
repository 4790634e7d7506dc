#!/usr/bin/env python3
"""A fine-grained FP8 checkpoint made by transformers + its reference logits (GPU machine, sm_89+).

    python3 scripts/make_fp8_checkpoint.py --src DIR --out FP8DIR [--prompts 16]

DIR is a BF16 checkpoint with prompts.json, e.g. the Qwen3-0.6B-size random model of
scripts/make_qwen3_06b_reference.py. transformers quantizes it at load with FineGrainedFP8Config
(E4M3 weights, 128 x 128 block scales: the format of Qwen's Qwen3-*-FP8 checkpoints) and saves it:
FP8DIR/{config.json (quantization_config), model.safetensors (*.weight F8_E4M3, *.weight_scale_inv
F32), generation_config.json}. The saved checkpoint is then loaded as a user would and run on the
first --prompts prompts (up to 1,024 tokens): FP8DIR/prompts.json and FP8DIR/ref_logits.f32 (raw
float32 [prompts, vocab], last-token logits; transformers quantizes activations per token and
128-column group, dynamically). tests/gpu/test_cuda_fp8_weights.cpp (Fp8CheckpointFromTransformers)
compares the engine against them (NANOVLLM_FP8_DIR=FP8DIR, NANOVLLM_HF06B_DIR=DIR).
"""
import argparse
import json
import os
import shutil

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=16)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    qc = transformers.FineGrainedFP8Config(weight_block_size=(128, 128))
    model = transformers.AutoModelForCausalLM.from_pretrained(args.src, dtype=torch.bfloat16,
                                                              quantization_config=qc, device_map="cuda")
    model.save_pretrained(args.out, safe_serialization=True)
    del model
    shutil.copy(os.path.join(args.src, "generation_config.json"), args.out)
    with open(os.path.join(args.out, "config.json")) as f:
        print("quantization_config:", json.load(f).get("quantization_config"))
    with open(os.path.join(args.src, "prompts.json")) as f:
        prompts = [p for p in json.load(f)["prompts"] if len(p) <= 1024][: args.prompts]
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts}, f)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.out, device_map="cuda").eval()
    vocab = model.config.vocab_size
    out = torch.empty(len(prompts), vocab, dtype=torch.float32)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            out[i] = model(input_ids=torch.tensor([p], device="cuda")).logits[0, -1].float().cpu()
    out.numpy().tofile(os.path.join(args.out, "ref_logits.f32"))
    print(f"wrote {args.out}: {len(prompts)} prompts")


if __name__ == "__main__":
    main()
