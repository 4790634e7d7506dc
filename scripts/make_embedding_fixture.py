#!/usr/bin/env python3
"""Random-weight pooling models with reference outputs from sentence-transformers / transformers.

    python3 scripts/make_embedding_fixture.py --out tests/fixtures/pooling            # tiny, float32 (CPU tests)
    python3 scripts/make_embedding_fixture.py --out /tmp/pool06b --size 0.6b          # Qwen3-0.6B shapes, bf16 (GPU)

Needs torch, transformers, safetensors and sentence-transformers (the GPU machine). Writes, under --out:

  qwen3-embedding/   Qwen3-Embedding-shaped, Sentence-Transformers layout: model.safetensors saved
                     from Qwen3Model (names without "model."), config.json (Qwen3ForCausalLM, as the
                     real one), modules.json (Transformer, Pooling, Normalize), 1_Pooling/config.json
                     (lasttoken), reference.json: the prompts (token ids), their embeddings from
                     sentence-transformers' own Pooling + Normalize modules over transformers' final
                     hidden states, and Matryoshka cuts (the first d values, normalized) for `dims`.
  qwen3-embedding-mean/  the same network with mean pooling and no Normalize module.
  qwen3-reranker/    Qwen3-Reranker-shaped Qwen3ForCausalLM (tied embeddings, as the real one):
                     reference scores as Qwen3-Reranker's model card computes them (log_softmax over
                     the last token's [no, yes] logits, exp of yes) for token ids `no_id`, `yes_id`.
  qwen3-seqcls/      Qwen3ForSequenceClassification (num_labels 1, pad_token_id set): reference
                     scores sigmoid(transformers' logits), vLLM's activation for one label.

The models have no tokenizer: prompts are token ids (the reranker's stand in for its template).
Reference values are computed in float32 from exactly the saved weights (bf16 rounded first for
--size 0.6b). For --size 0.6b, "outputs_bf16" holds the same model's outputs from transformers in
bf16 on the GPU: the error bf16 arithmetic itself makes, the bar for ours (also bf16).
"""
import argparse
import json
import math
import os
import random

SIZES = {
    "tiny": dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 intermediate_size=128, num_hidden_layers=2, dtype="float32", lens=[1, 7, 33, 130, 300],
                 dims=[16, 32]),
    "0.6b": dict(vocab_size=151936, hidden_size=1024, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=3072, num_hidden_layers=28, dtype="bfloat16", lens=[1, 17, 130, 512, 2000],
                 dims=[128, 512]),
}
LINEAR_STD = 0.05
NO_ID, YES_ID = 11, 42  # the reranker's stand-ins for the tokens "no" and "yes"


def qwen3_config(size, **extra):
    from transformers import Qwen3Config
    s = SIZES[size]
    return Qwen3Config(vocab_size=s["vocab_size"], hidden_size=s["hidden_size"],
                       num_attention_heads=s["num_attention_heads"], num_key_value_heads=s["num_key_value_heads"],
                       head_dim=s["head_dim"], intermediate_size=s["intermediate_size"],
                       num_hidden_layers=s["num_hidden_layers"], max_position_embeddings=4096, rope_theta=1e6,
                       rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=2, **extra)


def randomize(model, seed, dtype):
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # norms around 1
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * LINEAR_STD)
            if dtype == "bfloat16":  # the reference runs from exactly the saved values
                p.copy_(p.to(torch.bfloat16).float())
    return model


def prompts_for(size, vocab, seed):
    rng = random.Random(seed)
    return [[rng.randint(3, vocab - 1) for _ in range(n)] for n in SIZES[size]["lens"]]


def save(model, out, name, dtype, architectures):
    import torch
    path = os.path.join(out, name)
    os.makedirs(path, exist_ok=True)
    if dtype == "bfloat16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(path, safe_serialization=True)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["architectures"] = architectures
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def write_json(path, name, obj):
    with open(os.path.join(path, name), "w") as f:
        json.dump(obj, f)


def bf16_copy(model):
    """The model as transformers runs it in bf16 on the GPU (SDPA attention): its outputs
    ("outputs_bf16") measure how far bf16 arithmetic itself lands from the float32 reference."""
    import copy
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m = copy.deepcopy(model).to(dev, torch.bfloat16)
    m.config._attn_implementation = "sdpa"
    return m, dev


def embedding_model(out, size, pooling, normalize, seed):
    import torch
    from sentence_transformers.models import Normalize, Pooling
    from transformers import Qwen3Model
    s = SIZES[size]
    model = randomize(Qwen3Model(qwen3_config(size)).float().eval(), seed, s["dtype"])
    name = "qwen3-embedding" if pooling == "lasttoken" else "qwen3-embedding-mean"
    prompts = prompts_for(size, s["vocab_size"], seed)
    pool = Pooling(s["hidden_size"], pooling_mode=pooling)
    norm = Normalize()
    def run(m, dev):
        embeddings, dims = [], {str(d): [] for d in s["dims"]}
        with torch.no_grad():
            for p in prompts:
                ids = torch.tensor([p], device=dev)
                mask = torch.ones_like(ids)
                h = m(input_ids=ids, attention_mask=mask).last_hidden_state.float().cpu()
                feats = pool({"token_embeddings": h, "attention_mask": mask.cpu()})
                raw = feats["sentence_embedding"][0]
                emb = norm(feats)["sentence_embedding"][0] if normalize else raw
                embeddings.append(emb.tolist())
                for d in s["dims"]:  # Matryoshka: cut, then normalize (sentence-transformers' truncate_dim + Normalize)
                    dims[str(d)].append(torch.nn.functional.normalize(raw[:d], dim=0).tolist())
        return embeddings, dims

    embeddings, dims = run(model, "cpu")
    extra = {"outputs_bf16": run(*bf16_copy(model))[0]} if s["dtype"] == "bfloat16" else {}
    path = save(model, out, name, s["dtype"], ["Qwen3ForCausalLM"])
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(path, "2_Normalize"), exist_ok=True)
    write_json(path, "modules.json", modules)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    write_json(os.path.join(path, "1_Pooling"), "config.json", pool.get_config_dict())
    write_json(path, "config_sentence_transformers.json",
               {"prompts": {"query": "Instruct: Given a web search query, retrieve relevant passages that answer "
                                     "the query\nQuery:", "document": ""},
                "default_prompt_name": None, "similarity_fn_name": "cosine"})
    write_json(path, "reference.json", {"kind": "embed", "pooling": pooling, "normalize": normalize,
                                        "prompts": prompts, "outputs": embeddings, "dims": dims, **extra})


def reranker_model(out, size, seed):
    import torch
    from transformers import Qwen3ForCausalLM
    s = SIZES[size]
    model = randomize(Qwen3ForCausalLM(qwen3_config(size, tie_word_embeddings=True)).float().eval(), seed, s["dtype"])
    prompts = prompts_for(size, s["vocab_size"], seed)
    def run(m, dev):
        scores = []
        with torch.no_grad():
            for p in prompts:  # Qwen3-Reranker's model card: log_softmax over [no, yes], exp of yes
                last = m(input_ids=torch.tensor([p], device=dev)).logits[0, -1].float()
                pair = torch.stack([last[NO_ID], last[YES_ID]])
                scores.append([torch.nn.functional.log_softmax(pair, dim=0)[1].exp().item()])
        return scores

    scores = run(model, "cpu")
    extra = {"outputs_bf16": run(*bf16_copy(model))} if s["dtype"] == "bfloat16" else {}
    path = save(model, out, "qwen3-reranker", s["dtype"], ["Qwen3ForCausalLM"])
    write_json(path, "reference.json", {"kind": "rerank", "no_id": NO_ID, "yes_id": YES_ID, "prompts": prompts,
                                        "outputs": scores, **extra})


def seqcls_model(out, size, seed):
    import torch
    from transformers import Qwen3ForSequenceClassification
    s = SIZES[size]
    model = Qwen3ForSequenceClassification(qwen3_config(size, num_labels=1, pad_token_id=1)).float().eval()
    model = randomize(model, seed, s["dtype"])
    prompts = prompts_for(size, s["vocab_size"], seed)  # ids >= 3: no pad token inside
    def run(m, dev):
        scores = []
        with torch.no_grad():
            for p in prompts:
                logit = m(input_ids=torch.tensor([p], device=dev)).logits[0, 0].float()
                scores.append([torch.sigmoid(logit).item()])
        return scores

    scores = run(model, "cpu")
    extra = {"outputs_bf16": run(*bf16_copy(model))} if s["dtype"] == "bfloat16" else {}
    path = save(model, out, "qwen3-seqcls", s["dtype"], ["Qwen3ForSequenceClassification"])
    write_json(path, "reference.json", {"kind": "classify", "prompts": prompts, "outputs": scores, **extra})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    embedding_model(a.out, a.size, "lasttoken", True, 101)
    embedding_model(a.out, a.size, "mean", False, 102)
    reranker_model(a.out, a.size, 103)
    seqcls_model(a.out, a.size, 104)
    for name in sorted(os.listdir(a.out)):
        print(name, sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(os.path.join(a.out, name))
                        for f in fs), "bytes")


if __name__ == "__main__":
    main()
