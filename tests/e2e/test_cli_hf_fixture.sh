#!/usr/bin/env bash
# `nanovllm generate --json` on the tiny Hugging Face fixtures: greedy tokens equal the
# reference's wherever its top-1/top-2 margin exceeds 0.05 (up to the first near-tie that went
# the other way), for all prompts in one batch, with and without prefix caching.
set -euo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for model in tiny-qwen3-tied tiny-qwen3-untied; do
  dir="$SRC/tests/fixtures/$model"
  python3 - "$dir/reference.json" > "$TMP/in.jsonl" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
for p in ref["prompts"]:
    print(json.dumps({"prompt_token_ids": p["prompt_token_ids"], "max_tokens": ref["max_new_tokens"],
                      "temperature": 0, "ignore_eos": True}))
PY
  for flags in "" "--no-enable-prefix-caching --block-size 16"; do
    # shellcheck disable=SC2086
    # The CPU's exact path (FP32 weights), as transformers ran the fixtures.
    "$BIN" generate --model "$dir" --device cpu --kernel-options cpu_precision=exact --kv-cache-memory 16000000 --input "$TMP/in.jsonl" --json $flags > "$TMP/out.jsonl"
    python3 - "$dir/reference.json" "$TMP/out.jsonl" "$model $flags" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
outs = [json.loads(l) for l in open(sys.argv[2])]
assert len(outs) == len(ref["prompts"]), f"{len(outs)} outputs for {len(ref['prompts'])} prompts"
compared = 0
for i, (o, r) in enumerate(zip(outs, ref["prompts"])):
    assert o["index"] == i and o["prompt_token_ids"] == r["prompt_token_ids"], f"request {i} out of order"
    assert o["finish_reason"] == "length", o["finish_reason"]
    assert len(o["token_ids"]) == len(r["greedy_token_ids"])
    for s, (got, want, m) in enumerate(zip(o["token_ids"], r["greedy_token_ids"], r["margins"])):
        if m > 0.05:
            assert got == want, f"{sys.argv[3]}: prompt {i} step {s}: got {got}, reference {want} (margin {m:.3f})"
            compared += 1
        if got != want:
            break
assert compared > 100, compared
print(f"ok: {sys.argv[3]}: {compared} tokens equal to transformers")
PY
  done
done
