#!/usr/bin/env python3
"""Build tiny random Qwen3 checkpoints plus Hugging Face reference outputs.

Generation (needs torch, transformers, safetensors; runs on CPU in float32):

    python3 scripts/make_fixtures.py --out OUTDIR [--only NAME ...]

writes OUTDIR/<model>/{config.json, generation_config.json, *.safetensors,
[model.safetensors.index.json], reference.json} for every model in MODELS.

Verification (standard library only, no torch needed):

    python3 scripts/make_fixtures.py --verify tests/fixtures

parses every safetensors header, checks names / dtypes / shapes against
config.json and checks the shape and self-consistency of reference.json.

The reference is computed from exactly the weights that are saved: for a
BF16 checkpoint the parameters are first rounded to bf16 and then the model
runs in float32 from those rounded values.
"""

import argparse
import copy
import datetime
import json
import math
import os
import platform
import struct
import sys

PROMPT_LENS = [1, 5, 17, 64, 130, 300]
MAX_NEW_TOKENS = 24
LINEAR_STD = 0.08          # std of every Linear / Embedding weight
NORM_LOW, NORM_HIGH = 0.5, 1.5  # RMSNorm weights ~ uniform(low, high)
LOGIT_DECIMALS = 5
MARGIN_DECIMALS = 6

MODELS = {
    "tiny-qwen3-tied": {
        "seed": 1234,
        "dtype": "bfloat16",
        "num_shards": 1,
        "config": {
            "vocab_size": 512,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,  # deliberately != hidden_size / num_attention_heads
            "intermediate_size": 160,
            "num_hidden_layers": 2,
            "rope_theta": 1000000.0,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": True,
            "bos_token_id": 0,
            "eos_token_id": [1, 2],  # list form (config.json and generation_config.json)
        },
    },
    "tiny-qwen3-untied": {
        "seed": 4321,
        "dtype": "float32",
        "num_shards": 2,
        "config": {
            "vocab_size": 700,
            "hidden_size": 96,
            "num_attention_heads": 6,
            "num_key_value_heads": 2,
            "head_dim": 24,
            "intermediate_size": 200,
            "num_hidden_layers": 3,
            "rope_theta": 10000.0,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": False,
            "bos_token_id": 0,
            "eos_token_id": 2,  # int form
        },
    },
}

# The tied model's shape with YaRN RoPE, as Qwen3's docs add it to config.json (rope_scaling), over
# a pre-training length of 128 so that the 300-token prompt reaches positions 2.5 x past it
# (factor * 128 = 512 = max_position_embeddings, so transformers sees a consistent factor).
MODELS["tiny-qwen3-yarn"] = {
    "seed": 2468,
    "dtype": "bfloat16",
    "num_shards": 1,
    "config": dict(MODELS["tiny-qwen3-tied"]["config"], rope_theta=10000.0, max_position_embeddings=512,
                   rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}),
}

COMMON_CONFIG = {
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "use_sliding_window": False,
    "sliding_window": None,
    "rope_scaling": None,
    "use_cache": True,
    "initializer_range": 0.02,
}

SAFETENSORS_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
                           "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


# --------------------------------------------------------------------------
# Pure-Python helpers (no torch)
# --------------------------------------------------------------------------

def eos_list(eos):
    if eos is None:
        return []
    if isinstance(eos, (list, tuple)):
        return [int(e) for e in eos]
    return [int(eos)]


def expected_tensors(cfg):
    """name -> shape, as Hugging Face's Qwen3ForCausalLM stores them."""
    v, h = cfg["vocab_size"], cfg["hidden_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter = cfg["intermediate_size"]
    out = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not cfg["tie_word_embeddings"]:
        out["lm_head.weight"] = [v, h]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out[p + "input_layernorm.weight"] = [h]
        out[p + "post_attention_layernorm.weight"] = [h]
        out[p + "self_attn.q_proj.weight"] = [nh * hd, h]
        out[p + "self_attn.k_proj.weight"] = [nkv * hd, h]
        out[p + "self_attn.v_proj.weight"] = [nkv * hd, h]
        out[p + "self_attn.o_proj.weight"] = [h, nh * hd]
        out[p + "self_attn.q_norm.weight"] = [hd]
        out[p + "self_attn.k_norm.weight"] = [hd]
        out[p + "mlp.gate_proj.weight"] = [inter, h]
        out[p + "mlp.up_proj.weight"] = [inter, h]
        out[p + "mlp.down_proj.weight"] = [h, inter]
    return out


def split_into_shards(names_and_bytes, num_shards):
    """Split an ordered list of (name, nbytes) into num_shards contiguous,
    non-empty groups of roughly equal byte size."""
    if num_shards <= 1:
        return [[n for n, _ in names_and_bytes]]
    if len(names_and_bytes) < num_shards:
        raise ValueError("fewer tensors than shards")
    total = sum(b for _, b in names_and_bytes)
    target = total / num_shards
    shards, cur, cur_bytes = [], [], 0
    remaining = len(names_and_bytes)
    for name, nbytes in names_and_bytes:
        shards_left = num_shards - len(shards)
        # Close the current shard if it is full enough, keeping at least one
        # tensor for every shard that still has to be opened.
        if cur and shards_left > 1 and (cur_bytes + nbytes / 2 > target or remaining < shards_left):
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(name)
        cur_bytes += nbytes
        remaining -= 1
    shards.append(cur)
    assert len(shards) == num_shards, (len(shards), num_shards)
    return shards


def shard_file_name(i, n):
    return "model-%05d-of-%05d.safetensors" % (i + 1, n)


def read_safetensors_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError("%s: too short" % path)
        (n,) = struct.unpack("<Q", raw)
        header = json.loads(f.read(n).decode("utf-8"))
    data_len = os.path.getsize(path) - 8 - n
    return header, data_len


# --------------------------------------------------------------------------
# Verification (standard library only)
# --------------------------------------------------------------------------

def verify_weights(d, exp, st_dtype, problems):
    """Checks the safetensors files (and index) of model directory d against exp (name -> shape), every
    tensor stored as st_dtype; appends to problems. Returns (found, files, total_bytes)."""
    index_path = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index = json.load(open(index_path))
        weight_map = index["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        index, weight_map = None, None
        files = ["model.safetensors"]
    found = {}
    total_bytes = 0
    for fn in files:
        header, data_len = read_safetensors_header(os.path.join(d, fn))
        spans = []
        for tname, info in header.items():
            if tname == "__metadata__":
                continue
            if tname in found:
                problems.append("%s appears twice" % tname)
            found[tname] = (fn, info)
            nel = 1
            for s in info["shape"]:
                nel *= s
            b0, b1 = info["data_offsets"]
            if b1 - b0 != nel * SAFETENSORS_DTYPE_BYTES[info["dtype"]]:
                problems.append("%s: offsets %r do not match shape %r" % (tname, info["data_offsets"], info["shape"]))
            spans.append((b0, b1))
            total_bytes += b1 - b0
            if weight_map is not None and weight_map.get(tname) != fn:
                problems.append("%s: index says %r, found in %s" % (tname, weight_map.get(tname), fn))
        spans.sort()
        pos = 0
        for b0, b1 in spans:
            if b0 != pos:
                problems.append("%s: gap/overlap at byte %d" % (fn, b0))
            pos = b1
        if pos != data_len:
            problems.append("%s: data length %d != %d" % (fn, data_len, pos))
    if weight_map is not None:
        if set(weight_map) != set(found):
            problems.append("index weight_map names differ from files")
        if index.get("metadata", {}).get("total_size") != total_bytes:
            problems.append("index total_size %r != %d" % (index.get("metadata", {}).get("total_size"), total_bytes))
    if set(exp) != set(found):
        problems.append("tensor names differ: missing %s extra %s"
                        % (sorted(set(exp) - set(found)), sorted(set(found) - set(exp))))
    for tname, shape in exp.items():
        if tname in found:
            info = found[tname][1]
            if info["shape"] != shape:
                problems.append("%s shape %r expected %r" % (tname, info["shape"], shape))
            if info["dtype"] != st_dtype:
                problems.append("%s dtype %s expected %s" % (tname, info["dtype"], st_dtype))

    return found, files, total_bytes


def verify_reference(ref, cfg, problems):
    """Checks reference.json's shape and self-consistency (every token the argmax of its logits, margins
    = top1 - top2); appends to problems. Returns (min_margin, argmax ties within rounding, eos generated)."""
    # reference.json
    v = cfg["vocab_size"]
    eos = eos_list(cfg["eos_token_id"])
    if ref.get("eos_token_ids") != eos:
        problems.append("reference eos_token_ids %r" % ref.get("eos_token_ids"))
    n_new = ref["max_new_tokens"]
    prompts = ref["prompts"]
    lens = [len(p["prompt_token_ids"]) for p in prompts]
    if lens != PROMPT_LENS:
        problems.append("prompt lengths %r" % lens)
    n_close = 0
    n_eos_generated = 0
    min_margin = float("inf")
    for pi, p in enumerate(prompts):
        if any(t in eos or t < 0 or t >= v for t in p["prompt_token_ids"]):
            problems.append("prompt %d has eos / out-of-range ids" % pi)
        toks, margins, logits = p["greedy_token_ids"], p["margins"], p["logits"]
        if not (len(toks) == len(margins) == len(logits) == n_new):
            problems.append("prompt %d: lengths %d %d %d" % (pi, len(toks), len(margins), len(logits)))
            continue
        for s in range(n_new):
            row = logits[s]
            if len(row) != v:
                problems.append("prompt %d step %d: %d logits" % (pi, s, len(row)))
                continue
            best = max(range(v), key=lambda j: row[j])
            srt = sorted(row, reverse=True)
            min_margin = min(min_margin, margins[s])
            if margins[s] < 0:
                problems.append("prompt %d step %d: negative margin" % (pi, s))
            if best != toks[s]:
                if abs(row[best] - row[toks[s]]) > 2 * 10 ** -LOGIT_DECIMALS:
                    problems.append("prompt %d step %d: token %d is not the argmax %d" % (pi, s, toks[s], best))
                else:
                    n_close += 1
            elif abs((srt[0] - srt[1]) - margins[s]) > 2 * 10 ** -LOGIT_DECIMALS:
                problems.append("prompt %d step %d: margin %r vs logits %r" % (pi, s, margins[s], srt[0] - srt[1]))
            if toks[s] in eos:
                n_eos_generated += 1
    return min_margin, n_close, n_eos_generated


def verify_model_dir(d, name=None):
    problems = []
    name = name or os.path.basename(os.path.normpath(d))
    cfg = json.load(open(os.path.join(d, "config.json")))
    gen = json.load(open(os.path.join(d, "generation_config.json")))
    ref = json.load(open(os.path.join(d, "reference.json")))

    for k in ["vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads",
              "head_dim", "intermediate_size", "num_hidden_layers", "rope_theta",
              "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings",
              "eos_token_id", "torch_dtype"]:
        if k not in cfg:
            problems.append("config.json lacks %s" % k)
    if cfg.get("architectures") != ["Qwen3ForCausalLM"]:
        problems.append("architectures: %r" % cfg.get("architectures"))
    if cfg.get("model_type") != "qwen3":
        problems.append("model_type: %r" % cfg.get("model_type"))
    if name in MODELS:
        spec = MODELS[name]
        for k, v in spec["config"].items():
            if cfg.get(k) != v:
                problems.append("config.json %s = %r, expected %r" % (k, cfg.get(k), v))
        if cfg.get("torch_dtype") != spec["dtype"]:
            problems.append("torch_dtype %r" % cfg.get("torch_dtype"))
    if eos_list(gen.get("eos_token_id")) != eos_list(cfg.get("eos_token_id")):
        problems.append("generation_config eos %r != config eos %r"
                        % (gen.get("eos_token_id"), cfg.get("eos_token_id")))

    st_dtype = {"bfloat16": "BF16", "float32": "F32", "float16": "F16"}[cfg["torch_dtype"]]
    found, files, total_bytes = verify_weights(d, expected_tensors(cfg), st_dtype, problems)
    min_margin, n_close, n_eos_generated = verify_reference(ref, cfg, problems)
    summary = {
        "tensors": len(found),
        "files": files,
        "tensor_bytes": total_bytes,
        "min_margin": min_margin,
        "argmax_ties_within_rounding": n_close,
        "eos_generated": n_eos_generated,
    }
    return problems, summary


def report(root, names, verify_model_dir):
    """verify_model_dir(dir, name) -> (problems, summary) for each model directory of names under root,
    printed, then the verdict; returns the exit status. Shared with the other fixture scripts."""
    bad = 0
    for n in names:
        problems, summary = verify_model_dir(os.path.join(root, n), n)
        print("%s: %s" % (n, json.dumps(summary)))
        for p in problems:
            print("  PROBLEM: " + p)
        bad += len(problems)
    print("verify: %s" % ("OK" if bad == 0 else "%d problem(s)" % bad))
    return 0 if bad == 0 else 1


def report_models(root, models, verify_model_dir, only):
    """report() over the models of `models` (those in `only`, if given) that root holds."""
    names = [n for n in models if os.path.isfile(os.path.join(root, n, "config.json")) and (not only or n in only)]
    if not names:
        print("no model directories of %s under %s" % (sorted(models), root))
        return 1
    return report(root, names, verify_model_dir)


def reference_description(architecture):
    return ("Greedy decoding with Hugging Face %s in float32 on CPU, eager attention, "
            "full forward pass (no KV cache) at every step, no eos stopping. "
            "logits[s] are the last-position logits that chose greedy_token_ids[s] "
            "(rounded to %d decimals); margins[s] = top1 - top2 logit before rounding."
            % (architecture, LOGIT_DECIMALS))


def verify(root):
    names = []
    for n in sorted(os.listdir(root)):
        if not os.path.isfile(os.path.join(root, n, "config.json")):
            continue
        arch = json.load(open(os.path.join(root, n, "config.json"))).get("architectures")
        if arch != ["Qwen3ForCausalLM"]:
            print("%s: %r, not checked here (scripts/make_family_fixtures.py --verify)" % (n, arch))
            continue
        names.append(n)
    if not names:
        print("no model directories under %s" % root)
        return 1
    return report(root, names, verify_model_dir)


# --------------------------------------------------------------------------
# Generation (torch + transformers)
# --------------------------------------------------------------------------

def log(msg):
    print("[make_fixtures] " + msg, flush=True)


def make_config(spec_cfg, use_rope_parameters):
    from transformers import Qwen3Config
    kw = {k: v for k, v in COMMON_CONFIG.items() if k not in ("rope_scaling", "sliding_window")}
    kw.update(copy.deepcopy(spec_cfg))  # transformers fills rope dicts in place (rope_theta)
    if use_rope_parameters:
        theta = kw.pop("rope_theta")
        rope = dict(kw.pop("rope_scaling", None) or {"rope_type": "default"})
        rope["rope_theta"] = theta
        kw["rope_parameters"] = rope
    config = Qwen3Config(**kw)
    config.architectures = ["Qwen3ForCausalLM"]
    return config


def expected_rope(spec_cfg):
    """(inv_freq, attention_scaling) that the config asks for, from the formulas in float64 (no
    torch): plain RoPE, or YaRN as transformers' _compute_yarn_parameters (factor, beta_fast 32,
    beta_slow 1, truncate, attention factor 0.1 ln(factor) + 1 unless given; no mscale)."""
    theta, dim = float(spec_cfg["rope_theta"]), spec_cfg["head_dim"]
    plain = [1.0 / theta ** (2 * i / dim) for i in range(dim // 2)]
    rs = spec_cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type", "default")) == "default":
        return plain, 1.0
    assert rs["rope_type"] == "yarn" and "mscale" not in rs, rs
    factor = rs["factor"]
    orig = rs.get("original_max_position_embeddings", spec_cfg["max_position_embeddings"])

    def correction_dim(rotations):
        return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(rs.get("beta_fast") or 32), correction_dim(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    inv = []
    for i, p in enumerate(plain):
        ramp = min(1.0, max(0.0, (i - low) / (high - low)))
        inv.append(p * (ramp / factor + 1 - ramp))
    scaling = rs.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
    return inv, scaling


def model_rope(model):
    """The rotary embedding the HF model actually uses: inv_freq buffer and attention_scaling."""
    rot = model.model.rotary_emb
    return rot.inv_freq.detach().double().cpu().tolist(), float(getattr(rot, "attention_scaling", 1.0))


def rope_matches(model, spec_cfg):
    inv, scaling = model_rope(model)
    exp, exp_scaling = expected_rope(spec_cfg)
    return (len(inv) == len(exp) and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(inv, exp))
            and abs(scaling - exp_scaling) <= 1e-6 * exp_scaling)


def build_model(name, spec):
    import torch
    from transformers import Qwen3ForCausalLM
    cfg = spec["config"]
    model = None
    for use_rp in (False, True):
        torch.manual_seed(spec["seed"])
        config = make_config(cfg, use_rp)
        try:
            config._attn_implementation = "eager"
        except Exception as e:  # pragma: no cover
            log("could not set eager attention on config: %r" % (e,))
        model = Qwen3ForCausalLM(config)
        try:
            model.set_attn_implementation("eager")
        except Exception as e:
            log("set_attn_implementation failed (%r); attn impl = %r" % (e, getattr(model.config, "_attn_implementation", None)))
        if rope_matches(model, cfg):
            log("%s: rope theta %g %s OK (rope_parameters form: %s)"
                % (name, cfg["rope_theta"], json.dumps(cfg.get("rope_scaling")), use_rp))
            break
        log("%s: rope inv_freq / attention_scaling mismatch with rope_theta kwarg=%s: %r; retrying"
            % (name, not use_rp, model_rope(model)))
        model = None
    if model is None:
        raise RuntimeError("could not get rope_theta %g, rope_scaling %r into the model"
                           % (cfg["rope_theta"], cfg.get("rope_scaling")))
    model.eval()
    model.to(torch.float32)

    # Structural checks.
    attn = model.model.layers[0].self_attn
    assert tuple(attn.q_proj.weight.shape) == (cfg["num_attention_heads"] * cfg["head_dim"], cfg["hidden_size"])
    assert tuple(attn.k_proj.weight.shape) == (cfg["num_key_value_heads"] * cfg["head_dim"], cfg["hidden_size"])
    assert attn.q_proj.bias is None
    tied_now = model.lm_head.weight is model.model.embed_tokens.weight
    if cfg["tie_word_embeddings"] and not tied_now:
        log("WARNING: tie_word_embeddings but lm_head not shared; tying manually")
        model.lm_head.weight = model.model.embed_tokens.weight
    if not cfg["tie_word_embeddings"]:
        assert not tied_now, "untied model shares lm_head with embed_tokens"

    # Informative random weights.
    gen = torch.Generator().manual_seed(spec["seed"] + 1)
    touched = set()
    with torch.no_grad():
        for mname, mod in model.named_modules():
            w = getattr(mod, "weight", None)
            if not isinstance(w, torch.nn.Parameter) or id(w) in touched:
                continue
            if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
                w.copy_(torch.randn(w.shape, generator=gen, dtype=torch.float32) * LINEAR_STD)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.zero_()
                    touched.add(id(mod.bias))
            elif "RMSNorm" in type(mod).__name__:
                w.copy_(torch.rand(w.shape, generator=gen, dtype=torch.float32) * (NORM_HIGH - NORM_LOW) + NORM_LOW)
            else:
                raise RuntimeError("unexpected module with weight: %s (%s)" % (mname, type(mod).__name__))
            touched.add(id(w))
        untouched = [n for n, p in model.named_parameters() if id(p) not in touched]
        if untouched:
            raise RuntimeError("parameters not re-drawn: %s" % untouched)
        if spec["dtype"] == "bfloat16":
            # Round parameters (not buffers such as rotary inv_freq) to bf16,
            # then compute in float32 from the rounded values.
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    assert rope_matches(model, cfg)
    return model


def tensors_to_save(model, spec):
    import torch
    save_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[spec["dtype"]]
    sd = model.state_dict()
    param_names = set(n for n, _ in model.named_parameters(remove_duplicate=False))
    out = {}
    for n, t in sd.items():
        if n not in param_names:
            log("state_dict entry %s is not a parameter; not saved" % n)
            continue
        if n == "lm_head.weight" and spec["config"]["tie_word_embeddings"]:
            continue
        out[n] = t.detach().to(save_dtype).contiguous().clone()
    exp = expected_tensors(spec["config"])
    if set(out) != set(exp):
        raise RuntimeError("tensor names differ from expectation: missing %s, extra %s"
                           % (sorted(set(exp) - set(out)), sorted(set(out) - set(exp))))
    for n, shape in exp.items():
        assert list(out[n].shape) == shape, (n, list(out[n].shape), shape)
    return out


def save_weights(tensors, d, num_shards):
    from safetensors.torch import save_file
    order = list(tensors)
    nb = [(n, tensors[n].numel() * tensors[n].element_size()) for n in order]
    if num_shards <= 1:
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return ["model.safetensors"]
    groups = split_into_shards(nb, num_shards)
    weight_map = {}
    files = []
    for i, g in enumerate(groups):
        fn = shard_file_name(i, num_shards)
        save_file({n: tensors[n] for n in g}, os.path.join(d, fn), metadata={"format": "pt"})
        files.append(fn)
        for n in g:
            weight_map[n] = fn
    index = {"metadata": {"total_size": sum(b for _, b in nb)},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return files


def write_configs(model, spec, d, transformers_version, architecture="Qwen3ForCausalLM", model_type="qwen3",
                  common=COMMON_CONFIG):
    """config.json (transformers' keys, then `common` and the spec's keys as given) and
    generation_config.json; returns the keys transformers wrote. Shared with make_family_fixtures.py."""
    model.config.save_pretrained(d)
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    hf_keys = sorted(cfg)
    for k in ("_attn_implementation", "attn_implementation", "_name_or_path"):
        cfg.pop(k, None)
    cfg.update(common)
    cfg.update(spec["config"])  # top-level rope_theta, rope_scaling, eos form, etc. exactly as specified
    cfg["architectures"] = [architecture]
    cfg["model_type"] = model_type
    cfg["torch_dtype"] = spec["dtype"]
    cfg["dtype"] = spec["dtype"]
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    gen = {
        "_from_model_config": False,
        "bos_token_id": spec["config"]["bos_token_id"],
        "eos_token_id": spec["config"]["eos_token_id"],
        "do_sample": False,
        "transformers_version": transformers_version,
    }
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    return hf_keys


def make_prompts(spec):
    import torch
    cfg = spec["config"]
    banned = set(eos_list(cfg["eos_token_id"])) | {cfg["bos_token_id"]}
    allowed = [i for i in range(cfg["vocab_size"]) if i not in banned]
    g = torch.Generator().manual_seed(spec["seed"] + 2)
    prompts = []
    for n in PROMPT_LENS:
        idx = torch.randint(0, len(allowed), (n,), generator=g).tolist()
        prompts.append([allowed[i] for i in idx])
    return prompts


def greedy_full(model, prompt, n_new):
    """Greedy decoding, full forward (no KV cache) at every step."""
    import torch
    ids = list(prompt)
    toks, margins, rows = [], [], []
    with torch.no_grad():
        for _ in range(n_new):
            out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
            lg = out.logits[0, -1].to(torch.float32)
            t = int(torch.argmax(lg))
            top2 = torch.topk(lg, 2).values
            toks.append(t)
            margins.append(float(top2[0] - top2[1]))
            rows.append(lg.clone())
            ids.append(t)
    return toks, margins, rows


def reference_entries(model, prompts, name, log):
    """Per prompt: the reference.json entry (greedy tokens, margins, rounded logits of every step), the
    first step's logits row, and the KV-cache cross-check. Shared with the other fixture scripts."""
    entries, step_rows, kv_checks = [], [], []
    for prompt in prompts:
        toks, margins, rows = greedy_full(model, prompt, MAX_NEW_TOKENS)
        step_rows.append(rows[0])
        try:
            ctoks, crows = greedy_cached(model, prompt, MAX_NEW_TOKENS)
            kv_checks.append({"tokens_agree": ctoks == toks,
                              "max_abs_logit_diff": float(max((a - b).abs().max() for a, b in zip(rows, crows)))})
        except Exception as e:
            kv_checks.append({"error": repr(e)})
        entries.append({
            "prompt_token_ids": prompt,
            "greedy_token_ids": toks,
            "margins": [round(m, MARGIN_DECIMALS) for m in margins],
            "logits": [[round(x, LOGIT_DECIMALS) for x in r.tolist()] for r in rows],
        })
        log("%s prompt len %d: tokens %s min margin %.4f" % (name, len(prompt), toks, min(margins)))
    return entries, step_rows, kv_checks


def greedy_cached(model, prompt, n_new):
    """Greedy decoding through HF's KV cache (cross-check only)."""
    import torch
    rows, toks = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt], dtype=torch.long), use_cache=True)
        for step in range(n_new):
            lg = out.logits[0, -1].to(torch.float32)
            t = int(torch.argmax(lg))
            rows.append(lg.clone())
            toks.append(t)
            if step + 1 < n_new:
                out = model(input_ids=torch.tensor([[t]], dtype=torch.long),
                            past_key_values=out.past_key_values, use_cache=True)
    return toks, rows


def hf_reload_check(d, prompt, ref_row, spec_cfg):
    import torch
    from transformers import Qwen3ForCausalLM
    try:
        m = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = Qwen3ForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        lg = m(input_ids=torch.tensor([prompt], dtype=torch.long), use_cache=False).logits[0, -1].float()
    return {
        "max_abs_diff_step0": float((lg - ref_row).abs().max()),
        "lm_head_tied": bool(m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()),
        "expected_tied": bool(spec_cfg["tie_word_embeddings"]),
        "rope_ok": rope_matches(m, spec_cfg),
        "loaded_eos_token_id": m.config.eos_token_id,
        "loaded_generation_eos_token_id": getattr(getattr(m, "generation_config", None), "eos_token_id", None),
    }


def hf_save_pretrained_names(model, tmpdir):
    """What HF's own save_pretrained would write (for the README / report)."""
    model.save_pretrained(tmpdir)
    res = {"files": sorted(os.listdir(tmpdir)), "tensors": {}}
    for fn in sorted(os.listdir(tmpdir)):
        if fn.endswith(".safetensors"):
            header, _ = read_safetensors_header(os.path.join(tmpdir, fn))
            for k, v in header.items():
                if k != "__metadata__":
                    res["tensors"][k] = [v["dtype"], v["shape"]]
    return res


def generate_one(name, spec, out_root, versions):
    import tempfile
    import torch
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    log("building %s" % name)
    model = build_model(name, spec)
    tensors = tensors_to_save(model, spec)
    files = save_weights(tensors, d, spec["num_shards"])
    hf_keys = write_configs(model, spec, d, versions["transformers"])
    log("%s: saved %s" % (name, files))

    prompts = make_prompts(spec)
    checks = {"kv_cache": [], "hf_config_keys_written": hf_keys,
              "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    inv_freq, attention_scaling = model_rope(model)
    entries, step0_rows, checks["kv_cache"] = reference_entries(model, prompts, name, log)
    try:
        checks["hf_reload"] = hf_reload_check(d, prompts[3], step0_rows[3], spec["config"])
    except Exception as e:
        checks["hf_reload"] = {"error": repr(e)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            m2 = build_model(name, spec)
            if spec["dtype"] == "bfloat16":
                m2 = m2.to(torch.bfloat16)
            checks["hf_save_pretrained"] = hf_save_pretrained_names(m2, tmp)
    except Exception as e:
        checks["hf_save_pretrained"] = {"error": repr(e)}
    log("%s checks: %s" % (name, json.dumps({k: v for k, v in checks.items() if k != "hf_save_pretrained"})))
    log("%s HF save_pretrained would write: %s" % (name, json.dumps(checks.get("hf_save_pretrained"))))

    ref = {
        "model": name,
        "dtype_saved": spec["dtype"],
        "max_new_tokens": MAX_NEW_TOKENS,
        "eos_token_ids": eos_list(spec["config"]["eos_token_id"]),
        "description": ("Greedy decoding with Hugging Face Qwen3ForCausalLM in float32 on CPU, "
                        "full forward pass (no KV cache) at every step, no eos stopping. "
                        "logits[s] are the last-position logits that chose greedy_token_ids[s] "
                        "(rounded to %d decimals); margins[s] = top1 - top2 logit before rounding."
                        % LOGIT_DECIMALS),
        "generator": dict(versions, seed=spec["seed"],
                          weights="Linear/Embedding ~ N(0, %g), RMSNorm ~ U(%g, %g)%s"
                          % (LINEAR_STD, NORM_LOW, NORM_HIGH,
                             "; rounded to bf16 before the reference" if spec["dtype"] == "bfloat16" else "")),
        "checks": checks,
        # The model's rotary embedding as transformers computed it (float32 inv_freq buffer).
        "rope": {"inv_freq": inv_freq, "attention_scaling": attention_scaling},
        "prompts": entries,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


def generate_all(script, models, generate_one, verify_root, out_root, only):
    """Generates every model of `models` (or those named in `only`) with generate_one(name, spec,
    out_root, versions), then checks the result with verify_root(out_root). Shared with
    make_family_fixtures.py."""
    import torch
    import transformers
    import safetensors
    torch.set_grad_enabled(False)
    versions = {
        "script": script,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "safetensors": getattr(safetensors, "__version__", "?"),
        "python": platform.python_version(),
        "compute": "cpu float32",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    log("versions: %s" % json.dumps(versions))
    os.makedirs(out_root, exist_ok=True)
    for name, spec in models.items():
        if only and name not in only:
            continue
        generate_one(name, spec, out_root, versions)
    try:
        return verify_root(out_root)
    except Exception as e:  # keep the generated files even if the checker breaks
        log("verify crashed: %r" % (e,))
        return 2


def cli(doc, generate_fn, verify_fn):
    """The command line of both fixture scripts: --out DIR [--only NAME ...] | --verify DIR."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory for generated fixtures")
    ap.add_argument("--only", nargs="*", default=None, help="model names to generate / verify")
    ap.add_argument("--verify", metavar="DIR", help="verify fixtures under DIR (no torch needed)")
    args = ap.parse_args()
    if args.verify:
        return verify_fn(args.verify, args.only)
    if not args.out:
        ap.error("--out or --verify is required")
    return generate_fn(args.out, args.only)


def main():
    return cli(__doc__, lambda out, only: generate_all("scripts/make_fixtures.py", MODELS, generate_one, verify, out, only),
               lambda root, only: verify(root))


if __name__ == "__main__":
    sys.exit(main())
