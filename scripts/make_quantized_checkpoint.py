#!/usr/bin/env python3
"""AWQ, GPTQ and compressed-tensors checkpoints in their real on-disk packing + transformers' reference.

    python3 scripts/make_quantized_checkpoint.py --src DIR --out OUT --format awq|gptq|compressed-tensors
        [--bits 4|8] [--group-size 32|64|128|-1] [--sym|--asym] [--desc-act] [--fp8] [--prompts N]
    python3 scripts/make_quantized_checkpoint.py --tiny --out tests/fixtures/int-checkpoints
    python3 scripts/make_quantized_checkpoint.py --dummy-config 8b|CONFIG.json --out OUT --format ...

Convert (GPU machine: torch, transformers, safetensors; no AutoAWQ / GPTQModel / compressed-tensors
needed): DIR is a BF16 or F32 Hugging Face checkpoint, e.g. the Qwen3-0.6B-size random model of
make_qwen3_06b_reference.py. Every decoder Linear (q/k/v/o_proj, gate/up/down_proj; not embeddings,
norms or lm_head) is quantized as the format's tool does without calibration and packed exactly as
it stores it (int_checkpoint_writers.py says how, per format); OUT/config.json carries the tool's
quantization_config (GPTQ also quantize_config.json). Then the REFERENCE: OUT is read back from disk
and dequantized from the formats' specifications (int_checkpoint_readers.py, independent code),
those weights are run by transformers (BF16 on the GPU for a BF16 source; F32 for F32 and --tiny),
and OUT gets prompts.json (DIR's prompts.json up to 1,024 tokens, the first --prompts; else random
ones), ref_logits.f32 (raw float32 [prompts, vocab]: each prompt's last-token logits) and
ref_tokens.json ({dtype, max_new_tokens, tokens, margins, noise}: --new-tokens greedy tokens per
prompt, full forward per step; margins = top-1 - top-2 logit; for a BF16 reference, noise = how far
float32 moves those two logits: a step whose margin is within it is a near-tie).
tests/gpu/test_cuda_int_checkpoints.cpp compares the engine with them (NANOVLLM_INT_CKPT_DIRS).

--tiny: the CPU fixtures (tests/unit/models/test_int_checkpoint_fixtures.cpp): TINY_VARIANTS below,
from tests/fixtures/tiny-qwen3-tied and a tiny Llama (make_family_fixtures' tiny-llama3 recipe at
hidden 64), each in OUT/<name> with an F32 reference on the CPU; plain tensors stay BF16 (KBs each).

--dummy-config: a random checkpoint of a real size (a make_dummy_fp8_checkpoint.py preset such as 8b,
or a config.json), streamed a decoder layer at a time, no reference: for benchmarks of the kernels.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import sys
import tempfile
import zlib

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int_checkpoint_readers as readers  # noqa: E402
import int_checkpoint_writers as writers  # noqa: E402
from int_checkpoint_writers import Scheme  # noqa: E402

LINEAR = re.compile(r"^model\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight$")
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# --tiny: name -> (source model, scheme). Qwen3 (K 64 / 128 / 160) takes group 32, Llama (K 64 / 128) 64.
TINY_VARIANTS = {
    "qwen3-awq": ("qwen3", Scheme("awq", 4, 32, sym=False)),
    "qwen3-gptq-actorder": ("qwen3", Scheme("gptq", 4, 32, sym=True, desc_act=True)),
    "qwen3-gptq8-asym": ("qwen3", Scheme("gptq", 8, 32, sym=False)),
    "qwen3-ct-w4a16": ("qwen3", Scheme("compressed-tensors", 4, 32, sym=True)),
    "qwen3-ct-w8a16-asym-channel": ("qwen3", Scheme("compressed-tensors", 8, -1, sym=False)),
    "qwen3-ct-fp8": ("qwen3", Scheme("compressed-tensors", fp8=True)),
    "llama-awq": ("llama", Scheme("awq", 4, 64, sym=False)),
    "llama-gptq-asym-channel": ("llama", Scheme("gptq", 4, -1, sym=False)),
    "llama-ct-w4a16-asym-actorder": ("llama", Scheme("compressed-tensors", 4, 64, sym=False, desc_act=True)),
}


def read_tensors(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        out.update(load_file(f))
    if not out:
        raise FileNotFoundError(f"no *.safetensors in {d}")
    return out


def model_dtype(config):
    return DTYPES[config.get("torch_dtype") or config.get("dtype") or "bfloat16"]


def convert(src, out, scheme, seed=0, plain_dtype=None):
    """Writes OUT: src's checkpoint with its decoder Linears in scheme's format (plain tensors cast
    to plain_dtype when given); returns the config written."""
    scheme.check()
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config.pop("quantization_config", None)
    dtype = model_dtype(config)
    tensors, n = {}, 0
    for name, t in sorted(read_tensors(src).items()):
        if LINEAR.match(name):
            prefix = name[: -len(".weight")]
            # One act order per layer input, as GPTQ's (its Hessian is the input's): q/k/v share
            # theirs, gate/up theirs, so a packed qkv_proj / gate_up_proj has one g_idx.
            shared_input = re.sub(r"\.([qkv]_proj|gate_proj|up_proj)$",
                                  lambda m: ".qkv" if m.group(1)[0] in "qkv" else ".gate_up", prefix)
            gen = torch.Generator().manual_seed(seed * 1000003 + zlib.crc32(shared_input.encode()))
            tensors.update({f"{prefix}.{k}": v.cpu() for k, v in writers.pack_linear(t, scheme, dtype, gen).items()})
            n += 1
        else:
            tensors[name] = t if plain_dtype is None else t.to(plain_dtype)
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config["quantization_config"] = writers.quantization_config(scheme)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if scheme.fmt == "gptq":  # AutoGPTQ writes it beside config.json
        with open(os.path.join(out, "quantize_config.json"), "w") as f:
            json.dump(config["quantization_config"], f, indent=2)
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), out)
    print(f"wrote {out}: {n} Linears as {scheme.name()}")
    return config


def load_reference_model(src, out, dtype, device):
    """transformers' model of src with OUT's weights dequantized (read back from disk)."""
    import make_qwen3_06b_reference as hf06b
    with open(os.path.join(out, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    state = readers.dequantize_checkpoint(read_tensors(out), qc)
    model = hf06b.load(src, dtype, device)
    missing, unexpected = model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False)
    assert not unexpected, unexpected
    assert all("lm_head" in k for k in missing), missing  # tied embeddings only
    return model


def forward_logits(model, ids, device):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids], device=device)).logits[0].float().cpu()


def reference(src, out, prompts, new_tokens, device, dtype):
    """OUT/{prompts.json, ref_logits.f32, ref_tokens.json} from OUT's dequantized weights."""
    model = load_reference_model(src, out, dtype, device)
    first, tokens, margins, top2 = [], [], [], []
    for p in prompts:
        seq, toks, marg, tops = list(p), [], [], []
        for _ in range(new_tokens):  # a full forward per step: the logits are those of the sequence
            row = forward_logits(model, seq, device)[-1]
            if not toks:
                first.append(row)
            v, i = row.topk(2)
            toks.append(int(i[0]))
            marg.append(float(v[0] - v[1]))
            tops.append((int(i[0]), int(i[1]), float(v[0]), float(v[1])))
            seq.append(int(i[0]))
        tokens.append(toks)
        margins.append(marg)
        top2.append(tops)
    noise = [[0.0] * new_tokens for _ in prompts]
    if dtype != torch.float32:  # how far float32 moves the two logits each step decided between
        del model
        model32 = load_reference_model(src, out, torch.float32, device)
        for j, p in enumerate(prompts):
            rows = forward_logits(model32, list(p) + tokens[j][:-1], device)[len(p) - 1:]
            noise[j] = [abs(v1 - float(rows[s][i1])) + abs(v2 - float(rows[s][i2]))
                        for s, (i1, i2, v1, v2) in enumerate(top2[j])]
    torch.stack(first).numpy().tofile(os.path.join(out, "ref_logits.f32"))
    with open(os.path.join(out, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts}, f)
    with open(os.path.join(out, "ref_tokens.json"), "w") as f:
        json.dump({"dtype": str(dtype).replace("torch.", ""), "max_new_tokens": new_tokens, "tokens": tokens,
                   "margins": margins, "noise": noise}, f)
    small = sum(m < max(0.05, n) for mm, nn in zip(margins, noise) for m, n in zip(mm, nn))
    print(f"reference of {out}: {len(prompts)} prompts x {new_tokens} greedy tokens ({dtype}), {small} near-ties")


def pick_prompts(src, count, vocab, seed=0):
    """src's prompts.json (up to 1,024 tokens, the first `count`), else `count` random prompts of
    lengths 1, 5, 17, 64, 130, ... (ids 3 .. vocab - 1: never the tiny models' bos / eos)."""
    path = os.path.join(src, "prompts.json")
    if os.path.exists(path):
        with open(path) as f:
            return [p for p in json.load(f)["prompts"] if len(p) <= 1024][:count]
    rng = random.Random(seed)
    lens = ([1, 5, 17, 64, 130] + [rng.randint(1, 300) for _ in range(count)])[:count]
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in lens]


def tiny_llama(d):
    """make_family_fixtures' tiny-llama3 (llama3 RoPE scaling, untied, GQA) at hidden 64, vocab 256."""
    import copy
    import transformers
    import make_family_fixtures as mff
    import make_fixtures as mf
    spec = copy.deepcopy(mff.MODELS["tiny-llama3"])
    spec.update(seed=4546, dtype="bfloat16", num_shards=1)
    spec["config"].update(vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                          intermediate_size=128)
    model = mff.build_model("tiny-llama-int", spec)
    os.makedirs(d, exist_ok=True)
    mf.save_weights(mff.tensors_to_save(model, spec), d, 1)
    mff.write_configs(model, spec, d, transformers.__version__)
    return d


def make_tiny(out_root, only, new_tokens):
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"qwen3": os.path.join(REPO, "tests", "fixtures", "tiny-qwen3-tied"),
                   "llama": tiny_llama(os.path.join(tmp, "tiny-llama"))}
        for seed, (name, (source, scheme)) in enumerate(TINY_VARIANTS.items()):
            if only and name not in only:
                continue
            src, out = sources[source], os.path.join(out_root, name)
            config = convert(src, out, scheme, seed=seed, plain_dtype=torch.bfloat16)
            prompts = pick_prompts(src, 5, config["vocab_size"], seed=seed)
            reference(src, out, prompts, new_tokens, "cpu", torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--src", help="the BF16 / F32 checkpoint to quantize")
    ap.add_argument("--format", choices=("awq", "gptq", "compressed-tensors"))
    ap.add_argument("--bits", type=int, default=4, choices=(4, 8))
    ap.add_argument("--group-size", type=int, default=128, help="32, 64, 128, ...; -1: per output channel")
    ap.add_argument("--sym", dest="sym", action="store_true", default=None, help="symmetric (gptq, ct default)")
    ap.add_argument("--asym", dest="sym", action="store_false", help="zero points (awq always)")
    ap.add_argument("--desc-act", action="store_true", help="act order: GPTQ desc_act / ct actorder group")
    ap.add_argument("--fp8", action="store_true", help="compressed-tensors float-quantized FP8 W8A8 dynamic")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=8, help="greedy tokens of the reference per prompt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="the CPU fixtures (TINY_VARIANTS) into OUT/<name>")
    ap.add_argument("--only", nargs="*", help="with --tiny: these variants only")
    ap.add_argument("--dummy-config", help="a make_dummy_fp8_checkpoint.py preset (8b, ...) or a config.json")
    args = ap.parse_args()
    if args.tiny:
        make_tiny(args.out, args.only, args.new_tokens)
        return
    if not args.format:
        ap.error("--format is required (or --tiny)")
    sym = args.sym if args.sym is not None else args.format != "awq"
    scheme = Scheme(args.format, args.bits, args.group_size, sym, args.desc_act, args.fp8)
    scheme.check()
    if args.dummy_config:
        import make_dummy_fp8_checkpoint as dummy
        if os.path.isfile(args.dummy_config):
            with open(args.dummy_config) as f:
                config = {k: v for k, v in json.load(f).items() if k != "quantization_config"}
        else:
            config = dummy.preset_config(args.dummy_config)
        gen = torch.Generator().manual_seed(args.seed)
        dummy.write_dummy(args.out, config, lambda w: writers.pack_linear(w, scheme, torch.bfloat16, gen),
                          writers.quantization_config(scheme), args.device, args.seed)
        print(f"wrote {args.out}: {config['num_hidden_layers']} layers, {scheme.name()}, random weights")
        return
    if not args.src:
        ap.error("--src is required (or --tiny / --dummy-config)")
    config = convert(args.src, args.out, scheme, args.seed)
    dtype = model_dtype(config)
    prompts = pick_prompts(args.src, args.prompts, config["vocab_size"], args.seed)
    reference(args.src, args.out, prompts, args.new_tokens, args.device,
              torch.float32 if dtype == torch.float32 else torch.bfloat16)


if __name__ == "__main__":
    main()
