#!/usr/bin/env python3
"""A fine-grained FP8 checkpoint made by transformers + its reference logits (GPU machine, sm_89+).

    python3 scripts/make_fp8_checkpoint.py --src DIR --out FP8DIR [--prompts 16]

DIR is a BF16 checkpoint with prompts.json, e.g. the Qwen3-0.6B-size random model of
scripts/make_qwen3_06b_reference.py. transformers quantizes it at load with FineGrainedFP8Config
(E4M3 weights, 128 x 128 block scales: the format of Qwen's Qwen3-*-FP8 checkpoints) and saves it:
FP8DIR/{config.json (quantization_config), model.safetensors (*.weight F8_E4M3, *.weight_scale_inv
F32), generation_config.json}. The saved checkpoint is then loaded as a user would and run on the
first --prompts prompts (up to 1,024 tokens): FP8DIR/prompts.json and FP8DIR/ref_logits.f32 (raw
float32 [prompts, vocab], last-token logits). transformers' own FP8 forward needs the `kernels`
package (not installed on the GPU machine, no network), so the reference runs transformers' BF16
model on the checkpoint's weights dequantized by hand (code x weight_scale_inv of its 128 x 128 block,
rounded to BF16): the weight-only semantics the engine implements. tests/gpu/test_cuda_fp8_weights.cpp
(Fp8CheckpointFromTransformers) compares the engine against them (NANOVLLM_FP8_DIR=FP8DIR).
"""
import argparse
import glob
import json
import os
import shutil

import torch
import transformers


def dequantize_blocks(codes, scale_inv, block=128):
    """[N, K] E4M3 codes x their [ceil(N/128), ceil(K/128)] block scales -> BF16."""
    n, k = codes.shape
    s = scale_inv.float().repeat_interleave(block, 0)[:n].repeat_interleave(block, 1)[:, :k]
    return (codes.float() * s).to(torch.bfloat16)


def dequantized_state(path):
    from safetensors.torch import load_file
    sd = {}
    for f in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        sd.update(load_file(f))
    out, n = {}, 0
    for k, v in sd.items():
        if k.endswith("weight_scale_inv"):
            continue
        if v.dtype == torch.float8_e4m3fn:
            out[k] = dequantize_blocks(v, sd[k + "_scale_inv"])
            n += 1
        else:
            out[k] = v
    print(f"dequantized {n} FP8 tensors of {path}")
    assert n > 0, "no F8_E4M3 tensors in the saved checkpoint"
    return out


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
    model = transformers.AutoModelForCausalLM.from_pretrained(args.src, dtype=torch.bfloat16,
                                                              device_map="cuda").eval()
    missing, unexpected = model.load_state_dict(dequantized_state(args.out), strict=False)
    assert not unexpected, unexpected
    assert all("lm_head" in k for k in missing), missing  # tied embeddings only
    vocab = model.config.vocab_size
    out = torch.empty(len(prompts), vocab, dtype=torch.float32)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            out[i] = model(input_ids=torch.tensor([p], device="cuda")).logits[0, -1].float().cpu()
    out.numpy().tofile(os.path.join(args.out, "ref_logits.f32"))
    print(f"wrote {args.out}: {len(prompts)} prompts")


if __name__ == "__main__":
    main()
