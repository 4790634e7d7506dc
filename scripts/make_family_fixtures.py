#!/usr/bin/env python3
"""Build tiny random Qwen2 / Llama 3 / Mistral checkpoints plus Hugging Face reference outputs.

The same recipe and reference.json format as scripts/make_fixtures.py (whose helpers this script
imports): random prompts of PROMPT_LENS tokens, greedy decoding with a full forward pass at every
step in float32 on CPU, eager attention, the last-position logits of every step, top1 - top2 margins.

Generation (needs torch, transformers, safetensors; no network):

    python3 scripts/make_family_fixtures.py --out OUTDIR [--only NAME ...]

writes OUTDIR/<model>/{config.json, generation_config.json, *.safetensors,
[model.safetensors.index.json], reference.json} for every model in MODELS.

Verification (standard library only, no torch needed):

    python3 scripts/make_family_fixtures.py --verify tests/fixtures

checks every directory of a model in MODELS: names / dtypes / shapes against config.json, the
reference's self-consistency, transformers' RoPE inverse frequencies against the formula (Llama 3
scaling included) and that the sliding window changed the logits exactly where it should.

What each model exercises:
  tiny-qwen2   Qwen2ForCausalLM: random non-zero q/k/v biases (o_proj has none), no q/k norm, GQA,
               head_dim = hidden / heads, tied embeddings; config.json carries sliding_window with
               use_sliding_window false (as real Qwen2.5 configs do): no window may be applied.
  tiny-llama3  LlamaForCausalLM: rope_scaling llama3 (factor 8, low/high freq factors 1/4, original
               context 64, so the 300-token prompt runs far past it), 9 heads over 3 KV heads, untied.
  tiny-mistral MistralForCausalLM: sliding_window 48 (shorter than the 64/130/300-token prompts),
               GQA, head_dim 32 != hidden / heads, untied.
"""

import copy
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (shared helpers: prompts, greedy loops, safetensors, checks)

LINEAR_STD = mf.LINEAR_STD
BIAS_STD = 0.3  # q/k/v biases ~ N(0, BIAS_STD): comparable to W x (std ~ 0.08 * sqrt(hidden))
NORM_LOW, NORM_HIGH = mf.NORM_LOW, mf.NORM_HIGH
ONE_PASS_TOL = 1e-4  # one forward over the whole sequence vs the step-by-step rows

FAMILIES = {
    "qwen2": {"architecture": "Qwen2ForCausalLM", "model_type": "qwen2", "config_class": "Qwen2Config",
              "qkv_bias": True},
    "llama": {"architecture": "LlamaForCausalLM", "model_type": "llama", "config_class": "LlamaConfig",
              "qkv_bias": False},
    "mistral": {"architecture": "MistralForCausalLM", "model_type": "mistral", "config_class": "MistralConfig",
                "qkv_bias": False},
}

MODELS = {
    "tiny-qwen2": {
        "family": "qwen2",
        "seed": 1357,
        "dtype": "bfloat16",
        "num_shards": 1,
        "config": {
            "vocab_size": 512,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,  # head_dim = 64 / 4 = 16 (Qwen2 has no head_dim key)
            "intermediate_size": 160,
            "num_hidden_layers": 2,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": True,
            "use_sliding_window": False,  # as Qwen2.5's configs: the window below is NOT applied
            "sliding_window": 32,
            "max_window_layers": 1,
            "hidden_act": "silu",
            "attention_dropout": 0.0,
            "use_cache": True,
            "initializer_range": 0.02,
            "bos_token_id": 0,
            "eos_token_id": [1, 2],
        },
    },
    "tiny-llama3": {
        "family": "llama",
        "seed": 2025,
        "dtype": "float32",
        "num_shards": 2,
        "config": {
            "vocab_size": 576,
            "hidden_size": 144,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_dim": 16,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            # theta 1e4 over head_dim 16 puts the 8 wavelengths 6.3 .. 3.5e3 on both sides of the
            # llama3 band [64 / 4, 64 / 1]: 1 high-frequency pair kept, 2 smoothed, 5 divided by 8.
            "rope_theta": 10000.0,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
            "rms_norm_eps": 1e-5,
            "max_position_embeddings": 512,
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
            "hidden_act": "silu",
            "attention_dropout": 0.0,
            "use_cache": True,
            "initializer_range": 0.02,
            "bos_token_id": 0,
            "eos_token_id": 2,
        },
    },
    "tiny-mistral": {
        "family": "mistral",
        "seed": 4747,
        "dtype": "bfloat16",
        "num_shards": 1,
        "config": {
            "vocab_size": 600,
            "hidden_size": 96,
            "num_attention_heads": 6,
            "num_key_value_heads": 2,
            "head_dim": 32,  # != 96 / 6
            "intermediate_size": 192,
            "num_hidden_layers": 3,
            "rope_theta": 10000.0,
            "rope_scaling": None,
            "rms_norm_eps": 1e-5,
            "max_position_embeddings": 1024,
            "tie_word_embeddings": False,
            "sliding_window": 48,
            "hidden_act": "silu",
            "attention_dropout": 0.0,
            "use_cache": True,
            "initializer_range": 0.02,
            "bos_token_id": 0,
            "eos_token_id": 2,
        },
    },
}


# --------------------------------------------------------------------------
# Pure-Python helpers (no torch)
# --------------------------------------------------------------------------

def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def family_of(cfg):
    for fam, info in FAMILIES.items():
        if cfg.get("architectures") == [info["architecture"]]:
            return fam
    return None


def expected_tensors(cfg, family):
    """name -> shape, as Hugging Face's <Family>ForCausalLM stores them."""
    v, h = cfg["vocab_size"], cfg["hidden_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
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
        if FAMILIES[family]["qkv_bias"]:
            out[p + "self_attn.q_proj.bias"] = [nh * hd]
            out[p + "self_attn.k_proj.bias"] = [nkv * hd]
            out[p + "self_attn.v_proj.bias"] = [nkv * hd]
        out[p + "mlp.gate_proj.weight"] = [inter, h]
        out[p + "mlp.up_proj.weight"] = [inter, h]
        out[p + "mlp.down_proj.weight"] = [h, inter]
    return out


def expected_rope(cfg):
    """(inv_freq, attention_scaling) the config asks for, from the formulas in float64: plain RoPE or
    Llama 3's (transformers' _compute_llama3_parameters: wavelengths below original / high_freq_factor
    kept, above original / low_freq_factor divided by factor, smoothly blended between)."""
    theta, dim = float(cfg["rope_theta"]), head_dim(cfg)
    plain = [1.0 / theta ** (2 * i / dim) for i in range(dim // 2)]
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return plain, 1.0
    assert kind == "llama3", rs
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / lo, old / hi
    out = []
    for f in plain:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / factor)
        else:
            s = (old / wavelen - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return out, 1.0


def effective_windows(cfg, family):
    """Per layer, the sliding window the family's config asks for (None: full attention)."""
    n = cfg["num_hidden_layers"]
    if family == "mistral":
        return [cfg.get("sliding_window")] * n
    if family == "qwen2":
        if not cfg.get("use_sliding_window") or cfg.get("sliding_window") is None:
            return [None] * n
        return [cfg["sliding_window"] if i >= cfg.get("max_window_layers", 0) else None for i in range(n)]
    return [None] * n


def rope_close(inv, scaling, cfg):
    exp, exp_scaling = expected_rope(cfg)
    return (len(inv) == len(exp) and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(inv, exp))
            and abs(scaling - exp_scaling) <= 1e-6 * exp_scaling)


# --------------------------------------------------------------------------
# Verification (standard library only)
# --------------------------------------------------------------------------

def verify_model_dir(d, name):
    problems = []
    spec = MODELS[name]
    fam = FAMILIES[spec["family"]]
    cfg = json.load(open(os.path.join(d, "config.json")))
    gen = json.load(open(os.path.join(d, "generation_config.json")))
    ref = json.load(open(os.path.join(d, "reference.json")))
    if cfg.get("architectures") != [fam["architecture"]]:
        problems.append("architectures: %r" % cfg.get("architectures"))
    if cfg.get("model_type") != fam["model_type"]:
        problems.append("model_type: %r" % cfg.get("model_type"))
    for k, v in spec["config"].items():
        if cfg.get(k) != v:
            problems.append("config.json %s = %r, expected %r" % (k, cfg.get(k), v))
    if cfg.get("torch_dtype") != spec["dtype"]:
        problems.append("torch_dtype %r" % cfg.get("torch_dtype"))
    if mf.eos_list(gen.get("eos_token_id")) != mf.eos_list(cfg.get("eos_token_id")):
        problems.append("generation_config eos %r != config eos %r" % (gen.get("eos_token_id"), cfg.get("eos_token_id")))

    st_dtype = {"bfloat16": "BF16", "float32": "F32", "float16": "F16"}[cfg["torch_dtype"]]
    found, files, total_bytes = mf.verify_weights(d, expected_tensors(cfg, spec["family"]), st_dtype, problems)
    min_margin, n_close, n_eos = mf.verify_reference(ref, cfg, problems)

    rope = ref.get("rope", {})
    if not rope_close(rope.get("inv_freq", []), rope.get("attention_scaling", 0.0), cfg):
        problems.append("transformers' inv_freq / attention_scaling differ from the formula: %r" % (rope,))
    windows = effective_windows(cfg, spec["family"])
    if ref.get("attention", {}).get("layer_windows") != windows:
        problems.append("reference attention.layer_windows %r, expected %r" % (ref.get("attention"), windows))
    wchecks = ref.get("checks", {}).get("window", [])
    if len(wchecks) != len(mf.PROMPT_LENS):
        problems.append("checks.window has %d entries" % len(wchecks))
    for pi, w in enumerate(wchecks):
        if w.get("max_abs_diff_one_pass", 1.0) > ONE_PASS_TOL:
            problems.append("prompt %d: one forward pass differs from the steps by %r" % (pi, w.get("max_abs_diff_one_pass")))
        if not w.get("as_expected"):
            problems.append("prompt %d: sliding window effect not as expected: %r" % (pi, w))
    summary = {
        "tensors": len(found),
        "files": files,
        "tensor_bytes": total_bytes,
        "min_margin": min_margin,
        "argmax_ties_within_rounding": n_close,
        "eos_generated": n_eos,
        "layer_windows": windows,
        "window_diffs": [w.get("max_abs_diff_vs_no_window") for w in wchecks],
    }
    return problems, summary


def verify(root, only=None):
    return mf.report_models(root, MODELS, verify_model_dir, only)


# --------------------------------------------------------------------------
# Generation (torch + transformers)
# --------------------------------------------------------------------------

def log(msg):
    print("[make_family_fixtures] " + msg, flush=True)


def model_class(family):
    import transformers
    return getattr(transformers, FAMILIES[family]["architecture"])


def make_config(family, spec_cfg, use_rope_parameters):
    import transformers
    kw = copy.deepcopy(spec_cfg)  # transformers fills rope dicts in place (rope_theta)
    if use_rope_parameters:
        theta = kw.pop("rope_theta")
        rope = dict(kw.pop("rope_scaling", None) or {"rope_type": "default"})
        rope["rope_theta"] = theta
        kw["rope_parameters"] = rope
    elif kw.get("rope_scaling") is None:
        kw.pop("rope_scaling", None)
    config = getattr(transformers, FAMILIES[family]["config_class"])(**kw)
    config.architectures = [FAMILIES[family]["architecture"]]
    return config


def model_rope(model):
    rot = model.model.rotary_emb
    return rot.inv_freq.detach().double().cpu().tolist(), float(getattr(rot, "attention_scaling", 1.0))


def rope_matches(model, cfg):
    inv, scaling = model_rope(model)
    return rope_close(inv, scaling, cfg)


def build_model(name, spec):
    import torch
    family, cfg = spec["family"], spec["config"]
    model = None
    for use_rp in (False, True):
        torch.manual_seed(spec["seed"])
        config = make_config(family, cfg, use_rp)
        try:
            config._attn_implementation = "eager"
        except Exception as e:  # pragma: no cover
            log("could not set eager attention on config: %r" % (e,))
        model = model_class(family)(config)
        try:
            model.set_attn_implementation("eager")
        except Exception as e:
            log("set_attn_implementation failed (%r); attn impl = %r"
                % (e, getattr(model.config, "_attn_implementation", None)))
        if rope_matches(model, cfg):
            log("%s: rope theta %g %s OK (rope_parameters form: %s)"
                % (name, cfg["rope_theta"], json.dumps(cfg.get("rope_scaling")), use_rp))
            break
        log("%s: rope mismatch with the rope_theta kwarg form=%s: %r vs expected %r; retrying"
            % (name, not use_rp, model_rope(model), expected_rope(cfg)))
        model = None
    if model is None:
        raise RuntimeError("could not get rope_theta %g, rope_scaling %r into the model"
                           % (cfg["rope_theta"], cfg.get("rope_scaling")))
    model.eval()
    model.to(torch.float32)

    # Structural checks.
    hd = head_dim(cfg)
    attn = model.model.layers[0].self_attn
    assert tuple(attn.q_proj.weight.shape) == (cfg["num_attention_heads"] * hd, cfg["hidden_size"])
    assert tuple(attn.k_proj.weight.shape) == (cfg["num_key_value_heads"] * hd, cfg["hidden_size"])
    want_bias = FAMILIES[family]["qkv_bias"]
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        assert (proj.bias is not None) == want_bias, (name, proj)
    assert attn.o_proj.bias is None
    assert not hasattr(attn, "q_norm") and not hasattr(attn, "k_norm")
    tied_now = model.lm_head.weight is model.model.embed_tokens.weight
    if cfg["tie_word_embeddings"] and not tied_now:
        log("WARNING: tie_word_embeddings but lm_head not shared; tying manually")
        model.lm_head.weight = model.model.embed_tokens.weight
    if not cfg["tie_word_embeddings"]:
        assert not tied_now, "untied model shares lm_head with embed_tokens"

    # Informative random weights (and biases).
    gen = torch.Generator().manual_seed(spec["seed"] + 1)
    touched = set()
    with torch.no_grad():
        for mname, mod in model.named_modules():
            w = getattr(mod, "weight", None)
            if not isinstance(w, torch.nn.Parameter) or id(w) in touched:
                continue
            if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
                w.copy_(torch.randn(w.shape, generator=gen, dtype=torch.float32) * LINEAR_STD)
                b = getattr(mod, "bias", None)
                if b is not None:
                    b.copy_(torch.randn(b.shape, generator=gen, dtype=torch.float32) * BIAS_STD)
                    touched.add(id(b))
            elif "RMSNorm" in type(mod).__name__:
                w.copy_(torch.rand(w.shape, generator=gen, dtype=torch.float32) * (NORM_HIGH - NORM_LOW) + NORM_LOW)
            else:
                raise RuntimeError("unexpected module with weight: %s (%s)" % (mname, type(mod).__name__))
            touched.add(id(w))
        untouched = [n for n, p in model.named_parameters() if id(p) not in touched]
        if untouched:
            raise RuntimeError("parameters not re-drawn: %s" % untouched)
        if spec["dtype"] == "bfloat16":
            for p in model.parameters():  # parameters, not buffers (rotary inv_freq stays float32)
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
    exp = expected_tensors(spec["config"], spec["family"])
    if set(out) != set(exp):
        raise RuntimeError("tensor names differ from expectation: missing %s, extra %s"
                           % (sorted(set(exp) - set(out)), sorted(set(out) - set(exp))))
    for n, shape in exp.items():
        assert list(out[n].shape) == shape, (n, list(out[n].shape), shape)
    return out


def write_configs(model, spec, d, transformers_version):
    fam = FAMILIES[spec["family"]]
    return mf.write_configs(model, spec, d, transformers_version, fam["architecture"], fam["model_type"], common={})


def without_window(spec):
    s = copy.deepcopy(spec)
    c = s["config"]
    c["sliding_window"] = None
    if "use_sliding_window" in c:
        c["use_sliding_window"] = False
    return s


def window_checks(name, spec, model, prompts, entries):
    """One forward pass over prompt + greedy tokens, with the model and with the same weights and every
    sliding window removed: the first must reproduce the step-by-step rows, the second must differ
    exactly where the sequence outgrows a window the config asks for."""
    import torch
    plain = build_model(name + " (no window)", without_window(spec))
    plain.load_state_dict(model.state_dict())
    windows = [w for w in effective_windows(spec["config"], spec["family"]) if w is not None]
    out = []
    with torch.no_grad():
        for prompt, e in zip(prompts, entries):
            seq = list(prompt) + e["greedy_token_ids"][:-1]
            ids = torch.tensor([seq], dtype=torch.long)
            a = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:].float()
            b = plain(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:].float()
            rows = torch.tensor(e["logits"], dtype=torch.float32)
            diff = float((a - b).abs().max())
            one_pass = float((a - rows).abs().max())
            expect_effect = any(len(seq) > w for w in windows)
            out.append({"seq_len": len(seq), "max_abs_diff_vs_no_window": diff,
                        "max_abs_diff_one_pass": one_pass, "window_expected_to_matter": expect_effect,
                        "as_expected": (diff > 1e-3) if expect_effect else (diff < 1e-6)})
    return out


def hf_reload_check(d, spec, prompt, ref_row):
    import torch
    cls = model_class(spec["family"])
    try:
        m = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = cls.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        lg = m(input_ids=torch.tensor([prompt], dtype=torch.long), use_cache=False).logits[0, -1].float()
    return {
        "max_abs_diff_step0": float((lg - ref_row).abs().max()),
        "lm_head_tied": bool(m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()),
        "expected_tied": bool(spec["config"]["tie_word_embeddings"]),
        "rope_ok": rope_matches(m, spec["config"]),
        "loaded_sliding_window": getattr(m.config, "sliding_window", None),
        "loaded_layer_types": getattr(m.config, "layer_types", None),
        "loaded_eos_token_id": m.config.eos_token_id,
    }


def generate_one(name, spec, out_root, versions):
    import tempfile
    import torch
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    log("building %s" % name)
    model = build_model(name, spec)
    files = mf.save_weights(tensors_to_save(model, spec), d, spec["num_shards"])
    hf_keys = write_configs(model, spec, d, versions["transformers"])
    log("%s: saved %s" % (name, files))

    prompts = mf.make_prompts(spec)
    checks = {"kv_cache": [], "hf_config_keys_written": hf_keys,
              "attn_implementation": getattr(model.config, "_attn_implementation", None),
              "hf_sliding_window": getattr(model.config, "sliding_window", None),
              "hf_layer_types": getattr(model.config, "layer_types", None)}
    inv_freq, attention_scaling = model_rope(model)
    entries, step_rows, checks["kv_cache"] = mf.reference_entries(model, prompts, name, log)
    checks["window"] = window_checks(name, spec, model, prompts, entries)
    try:
        checks["hf_reload"] = hf_reload_check(d, spec, prompts[5], step_rows[5])
    except Exception as e:
        checks["hf_reload"] = {"error": repr(e)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            m2 = build_model(name, spec)
            if spec["dtype"] == "bfloat16":
                m2 = m2.to(torch.bfloat16)
            checks["hf_save_pretrained"] = mf.hf_save_pretrained_names(m2, tmp)
    except Exception as e:
        checks["hf_save_pretrained"] = {"error": repr(e)}
    log("%s checks: %s" % (name, json.dumps({k: v for k, v in checks.items() if k != "hf_save_pretrained"})))

    arch = FAMILIES[spec["family"]]["architecture"]
    ref = {
        "model": name,
        "architecture": arch,
        "dtype_saved": spec["dtype"],
        "max_new_tokens": mf.MAX_NEW_TOKENS,
        "eos_token_ids": mf.eos_list(spec["config"]["eos_token_id"]),
        "description": mf.reference_description(arch),
        "generator": dict(versions, seed=spec["seed"],
                          weights="Linear/Embedding ~ N(0, %g), biases ~ N(0, %g), RMSNorm ~ U(%g, %g)%s"
                          % (LINEAR_STD, BIAS_STD, NORM_LOW, NORM_HIGH,
                             "; rounded to bf16 before the reference" if spec["dtype"] == "bfloat16" else "")),
        "checks": checks,
        "rope": {"inv_freq": inv_freq, "attention_scaling": attention_scaling},
        # The window (keys a query reads, itself included) each layer applies; null = full attention.
        "attention": {"layer_windows": effective_windows(spec["config"], spec["family"])},
        "prompts": entries,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


def main():
    return mf.cli(__doc__,
                  lambda out, only: mf.generate_all("scripts/make_family_fixtures.py", MODELS, generate_one,
                                                    lambda root: verify(root, only), out, only),
                  verify)


if __name__ == "__main__":
    sys.exit(main())
