#!/usr/bin/env python3
"""Build tiny random Qwen3-MoE checkpoints plus Hugging Face reference outputs.

The same recipe and reference.json format as scripts/make_fixtures.py (whose helpers this script
imports): random prompts of PROMPT_LENS tokens, greedy decoding with a full forward pass at every
step in float32 on CPU, eager attention, the last-position logits of every step, top1 - top2 margins.

Generation (needs torch, transformers, safetensors; no network):

    python3 scripts/make_moe_fixtures.py --out OUTDIR [--only NAME ...]

writes OUTDIR/<model>/{config.json, generation_config.json, *.safetensors,
[model.safetensors.index.json], reference.json} for every model in MODELS.

Verification (standard library only, no torch needed):

    python3 scripts/make_moe_fixtures.py --verify tests/fixtures

Checkpoint layout: the published Qwen/Qwen3-30B-A3B stores one tensor per expert and projection
(model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight) and the router as mlp.gate.weight. The
fixtures are written in that layout whatever transformers keeps in memory (transformers 5 fuses the
experts into mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I]; 4.x keeps a
ModuleList), and the generator reloads the written files with from_pretrained and requires the same
logits, which proves the names and the split of the fused tensors.

Which layers are sparse (transformers' Qwen3MoeDecoderLayer): layer i uses the MoE block when
i is not in mlp_only_layers and num_experts > 0 and (i + 1) % decoder_sparse_step == 0; else a dense
Qwen3MoeMLP of intermediate_size.

What each model exercises:
  tiny-qwen3-moe         3 layers, layer 1 dense through mlp_only_layers, 8 experts, top-2,
                         norm_topk_prob true, head_dim 24 != hidden / heads, GQA 6/2, untied,
                         bf16 in 2 shards.
  tiny-qwen3-moe-nonorm  3 layers with decoder_sparse_step 2 (only layer 1 sparse), 6 experts,
                         top-3 without renormalization, tied embeddings, float32.
Each reference also records, per prompt, the smallest gap between the k-th and (k+1)-th router
probability over every token and sparse layer (a gap near 0 would make the expert choice fragile).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (shared helpers: prompts, greedy loops, safetensors, checks)

ARCH, MODEL_TYPE = "Qwen3MoeForCausalLM", "qwen3_moe"
ROUTER_GAP_MIN = 1e-5  # smaller k-th / (k+1)-th router probability gaps are reported as problems

COMMON = {
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 1024,
    "attention_bias": False,
    "use_sliding_window": False,
    "sliding_window": None,
    "hidden_act": "silu",
    "attention_dropout": 0.0,
    "use_cache": True,
    "initializer_range": 0.02,
    "router_aux_loss_coef": 0.001,
    "output_router_logits": False,
    "bos_token_id": 0,
    "eos_token_id": [1, 2],
}

MODELS = {
    "tiny-qwen3-moe": {
        "seed": 9301,
        "dtype": "bfloat16",
        "num_shards": 2,
        "config": dict(COMMON, **{
            "vocab_size": 520,
            "hidden_size": 72,
            "num_attention_heads": 6,
            "num_key_value_heads": 2,
            "head_dim": 24,  # != 72 / 6
            "intermediate_size": 136,  # the dense layer's MLP
            "moe_intermediate_size": 40,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "norm_topk_prob": True,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [1],
            "num_hidden_layers": 3,
            "tie_word_embeddings": False,
        }),
    },
    "tiny-qwen3-moe-nonorm": {
        "seed": 9302,
        "dtype": "float32",
        "num_shards": 1,
        "config": dict(COMMON, **{
            "vocab_size": 448,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 96,
            "moe_intermediate_size": 24,
            "num_experts": 6,
            "num_experts_per_tok": 3,
            "norm_topk_prob": False,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [],
            "num_hidden_layers": 3,
            "tie_word_embeddings": True,
        }),
    },
}


# --------------------------------------------------------------------------
# Pure-Python helpers (no torch)
# --------------------------------------------------------------------------

def sparse_layers(cfg):
    """Layer indices that use the MoE block, as transformers' Qwen3MoeDecoderLayer decides."""
    only = cfg.get("mlp_only_layers") or []
    step = cfg.get("decoder_sparse_step", 1)
    return [i for i in range(cfg["num_hidden_layers"])
            if i not in only and cfg["num_experts"] > 0 and (i + 1) % step == 0]


def expected_tensors(cfg):
    """name -> shape, in the published Qwen3-30B-A3B layout (one tensor per expert)."""
    h = cfg["hidden_size"]
    out = mf.expected_tensors(cfg)  # Qwen3's, a dense MLP in every layer
    for i in sparse_layers(cfg):
        p = "model.layers.%d.mlp." % i
        for proj in ("gate_proj", "up_proj", "down_proj"):
            del out[p + proj + ".weight"]
        inter = cfg["moe_intermediate_size"]
        out[p + "gate.weight"] = [cfg["num_experts"], h]
        for e in range(cfg["num_experts"]):
            q = p + "experts.%d." % e
            out[q + "gate_proj.weight"] = [inter, h]
            out[q + "up_proj.weight"] = [inter, h]
            out[q + "down_proj.weight"] = [h, inter]
    return out


def verify_model_dir(d, name):
    problems = []
    spec = MODELS[name]
    cfg = json.load(open(os.path.join(d, "config.json")))
    gen = json.load(open(os.path.join(d, "generation_config.json")))
    ref = json.load(open(os.path.join(d, "reference.json")))
    if cfg.get("architectures") != [ARCH]:
        problems.append("architectures: %r" % cfg.get("architectures"))
    if cfg.get("model_type") != MODEL_TYPE:
        problems.append("model_type: %r" % cfg.get("model_type"))
    for k, v in spec["config"].items():
        if cfg.get(k) != v:
            problems.append("config.json %s = %r, expected %r" % (k, cfg.get(k), v))
    if "num_local_experts" in cfg and cfg["num_local_experts"] != cfg["num_experts"]:
        problems.append("num_local_experts %r != num_experts %r" % (cfg["num_local_experts"], cfg["num_experts"]))
    if cfg.get("torch_dtype") != spec["dtype"]:
        problems.append("torch_dtype %r" % cfg.get("torch_dtype"))
    if mf.eos_list(gen.get("eos_token_id")) != mf.eos_list(cfg.get("eos_token_id")):
        problems.append("generation_config eos %r != config eos %r" % (gen.get("eos_token_id"), cfg.get("eos_token_id")))
    st_dtype = {"bfloat16": "BF16", "float32": "F32"}[cfg["torch_dtype"]]
    found, files, total_bytes = mf.verify_weights(d, expected_tensors(cfg), st_dtype, problems)
    min_margin, n_close, n_eos = mf.verify_reference(ref, cfg, problems)
    moe = ref.get("moe", {})
    if moe.get("sparse_layers") != sparse_layers(cfg):
        problems.append("reference moe.sparse_layers %r, expected %r" % (moe.get("sparse_layers"), sparse_layers(cfg)))
    gaps = moe.get("min_router_gap", [])
    if len(gaps) != len(mf.PROMPT_LENS) or any(g < ROUTER_GAP_MIN for g in gaps):
        problems.append("router top-k gaps %r (each must be >= %g)" % (gaps, ROUTER_GAP_MIN))
    reload = ref.get("checks", {}).get("hf_reload", {})
    if not reload.get("max_abs_diff_step0", 1.0) < 1e-4:
        problems.append("from_pretrained of the written files differs: %r" % (reload,))
    summary = {"tensors": len(found), "files": files, "tensor_bytes": total_bytes, "min_margin": min_margin,
               "argmax_ties_within_rounding": n_close, "eos_generated": n_eos,
               "sparse_layers": moe.get("sparse_layers"), "min_router_gap": gaps}
    return problems, summary


def verify(root, only=None):
    return mf.report_models(root, MODELS, verify_model_dir, only)


# --------------------------------------------------------------------------
# Generation (torch + transformers)
# --------------------------------------------------------------------------

def log(msg):
    print("[make_moe_fixtures] " + msg, flush=True)


def build_model(name, spec):
    import torch
    import transformers
    cfg = spec["config"]
    hd = cfg["head_dim"]
    want = [1.0 / cfg["rope_theta"] ** (2 * i / hd) for i in range(hd // 2)]
    model = None
    for use_rope_parameters in (False, True):  # transformers 4 takes rope_theta, 5 rope_parameters
        torch.manual_seed(spec["seed"])
        kw = {k: v for k, v in cfg.items() if k != "rope_scaling"}
        if use_rope_parameters:
            kw["rope_parameters"] = {"rope_type": "default", "rope_theta": kw.pop("rope_theta")}
        try:
            config = transformers.Qwen3MoeConfig(**kw)
        except TypeError as e:
            log("Qwen3MoeConfig(rope_parameters form: %s) refused: %r" % (use_rope_parameters, e))
            continue
        config.architectures = [ARCH]
        config.head_dim = hd  # (transformers 5's Qwen3MoeConfig declares no head_dim; the attention reads it)
        try:
            config._attn_implementation = "eager"
        except Exception as e:  # pragma: no cover
            log("could not set eager attention on config: %r" % (e,))
        model = transformers.Qwen3MoeForCausalLM(config)
        inv = model.model.rotary_emb.inv_freq.double().tolist()
        if len(inv) == len(want) and all(abs(a - b) <= 1e-5 * b for a, b in zip(inv, want)):
            break
        log("%s: rope mismatch (rope_parameters form: %s): %r" % (name, use_rope_parameters, inv[:4]))
        model = None
    if model is None:
        raise RuntimeError("could not get rope_theta %g into Qwen3MoeForCausalLM" % cfg["rope_theta"])
    for setter, arg in (("set_attn_implementation", "eager"), ("set_experts_implementation", "eager")):
        if hasattr(model, setter):
            try:
                getattr(model, setter)(arg)
            except Exception as e:
                log("%s(%r) failed: %r" % (setter, arg, e))
    model.eval()
    model.to(torch.float32)
    sparse = sparse_layers(cfg)
    for i, layer in enumerate(model.model.layers):
        is_moe = hasattr(layer.mlp, "experts")
        assert is_moe == (i in sparse), (name, i, type(layer.mlp).__name__)
        assert layer.self_attn.q_proj.weight.shape[0] == cfg["num_attention_heads"] * hd
    tied_now = model.lm_head.weight is model.model.embed_tokens.weight
    if cfg["tie_word_embeddings"] and not tied_now:
        log("WARNING: tie_word_embeddings but lm_head not shared; tying manually")
        model.lm_head.weight = model.model.embed_tokens.weight
    assert cfg["tie_word_embeddings"] or not tied_now, "untied model shares lm_head with embed_tokens"

    # Informative random weights: every matrix N(0, LINEAR_STD), every RMSNorm U(NORM_LOW, NORM_HIGH).
    gen = torch.Generator().manual_seed(spec["seed"] + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():  # tied weights appear once
            if pname.endswith("norm.weight"):
                p.copy_(torch.rand(p.shape, generator=gen) * (mf.NORM_HIGH - mf.NORM_LOW) + mf.NORM_LOW)
            else:
                assert p.dim() >= 2, pname
                p.copy_(torch.randn(p.shape, generator=gen) * mf.LINEAR_STD)
            if spec["dtype"] == "bfloat16":
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def per_expert_tensors(model, spec):
    """The checkpoint tensors in the published per-expert layout, from either in-memory layout."""
    import torch
    cfg = spec["config"]
    E, I, H = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["hidden_size"]
    save_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[spec["dtype"]]
    out = {}
    for n, t in model.state_dict().items():
        if n == "lm_head.weight" and cfg["tie_word_embeddings"]:
            continue
        t = t.detach()
        if n.endswith("mlp.experts.gate_up_proj"):  # transformers 5: [E, 2I, H], gate rows then up rows
            p = n[: -len("gate_up_proj")]
            if tuple(t.shape) == (E, H, 2 * I):
                t = t.transpose(1, 2)
            assert tuple(t.shape) == (E, 2 * I, H), (n, tuple(t.shape))
            for e in range(E):
                out[p + "%d.gate_proj.weight" % e] = t[e, :I]
                out[p + "%d.up_proj.weight" % e] = t[e, I:]
            continue
        if n.endswith("mlp.experts.down_proj"):  # transformers 5: [E, H, I]
            p = n[: -len("down_proj")]
            if tuple(t.shape) == (E, I, H):
                t = t.transpose(1, 2)
            assert tuple(t.shape) == (E, H, I), (n, tuple(t.shape))
            for e in range(E):
                out[p + "%d.down_proj.weight" % e] = t[e]
            continue
        out[n] = t
    out = {n: t.to(save_dtype).contiguous().clone() for n, t in out.items()}
    exp = expected_tensors(cfg)
    if set(out) != set(exp):
        raise RuntimeError("tensor names differ from expectation: missing %s, extra %s"
                           % (sorted(set(exp) - set(out)), sorted(set(out) - set(exp))))
    for n, shape in exp.items():
        assert list(out[n].shape) == shape, (n, list(out[n].shape), shape)
    return {n: out[n] for n in exp}


def router_gaps(model, spec, prompts, entries):
    """Per prompt, over every token of prompt + greedy tokens and every sparse layer: the smallest gap
    between the k-th and (k+1)-th softmax probability of the router."""
    import torch
    k = spec["config"]["num_experts_per_tok"]
    gaps = []
    seen = []

    def hook(_mod, inp, _out):
        logits = torch.nn.functional.linear(inp[0].reshape(-1, inp[0].shape[-1]).float(), _mod.weight.float())
        top = torch.topk(torch.softmax(logits, dim=-1), k + 1, dim=-1).values
        seen.append(float((top[:, k - 1] - top[:, k]).min()))

    handles = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.layers if hasattr(layer.mlp, "gate")]
    try:
        with torch.no_grad():
            for prompt, e in zip(prompts, entries):
                seen.clear()
                seq = list(prompt) + e["greedy_token_ids"][:-1]
                model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False)
                gaps.append(min(seen))
    finally:
        for h in handles:
            h.remove()
    return gaps


def hf_reload_check(d, prompt, ref_row):
    import torch
    import transformers
    try:
        m = transformers.Qwen3MoeForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = transformers.Qwen3MoeForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                                             attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        lg = m(input_ids=torch.tensor([prompt], dtype=torch.long), use_cache=False).logits[0, -1].float()
    return {"max_abs_diff_step0": float((lg - ref_row).abs().max()),
            "loaded_num_experts": getattr(m.config, "num_experts", None),
            "loaded_mlp_only_layers": getattr(m.config, "mlp_only_layers", None)}


def generate_one(name, spec, out_root, versions):
    import tempfile
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    log("building %s" % name)
    model = build_model(name, spec)
    files = mf.save_weights(per_expert_tensors(model, spec), d, spec["num_shards"])
    hf_keys = mf.write_configs(model, spec, d, versions["transformers"], ARCH, MODEL_TYPE, common={})
    log("%s: saved %s" % (name, files))
    prompts = mf.make_prompts(spec)
    checks = {"kv_cache": [], "hf_config_keys_written": hf_keys,
              "attn_implementation": getattr(model.config, "_attn_implementation", None),
              "in_memory_expert_params": sorted(n for n, _ in model.named_parameters() if n.startswith(
                  "model.layers.%d.mlp.experts." % sparse_layers(spec["config"])[0]))[:6]}
    entries, step_rows, checks["kv_cache"] = mf.reference_entries(model, prompts, name, log)
    gaps = router_gaps(model, spec, prompts, entries)
    try:  # verify() requires it: it proves the per-expert names and the split of fused tensors
        checks["hf_reload"] = hf_reload_check(d, prompts[5], step_rows[5])
    except Exception as e:
        checks["hf_reload"] = {"error": repr(e)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            checks["hf_save_pretrained"] = mf.hf_save_pretrained_names(build_model(name, spec), tmp)
    except Exception as e:
        checks["hf_save_pretrained"] = {"error": repr(e)}
    log("%s checks: %s router gaps %s" % (name, json.dumps({k: v for k, v in checks.items()
                                                            if k != "hf_save_pretrained"}), gaps))
    ref = {
        "model": name,
        "architecture": ARCH,
        "dtype_saved": spec["dtype"],
        "max_new_tokens": mf.MAX_NEW_TOKENS,
        "eos_token_ids": mf.eos_list(spec["config"]["eos_token_id"]),
        "description": mf.reference_description(ARCH),
        "generator": dict(versions, seed=spec["seed"],
                          weights="matrices ~ N(0, %g), RMSNorm ~ U(%g, %g)%s"
                          % (mf.LINEAR_STD, mf.NORM_LOW, mf.NORM_HIGH,
                             "; rounded to bf16 before the reference" if spec["dtype"] == "bfloat16" else "")),
        "checks": checks,
        "moe": {"sparse_layers": sparse_layers(spec["config"]), "min_router_gap": gaps},
        "prompts": entries,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


def main():
    return mf.cli(__doc__,
                  lambda out, only: mf.generate_all("scripts/make_moe_fixtures.py", MODELS, generate_one,
                                                    lambda root: verify(root, only), out, only),
                  verify)


if __name__ == "__main__":
    sys.exit(main())
