#!/usr/bin/env bash
# Bad input to `nanovllm generate` gets one clear line naming the problem and exit code 2,
# never a crash. Each case: expected message fragment, then the arguments.
set -uo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FIX="$SRC/tests/fixtures/tiny-qwen3-tied"
fails=0

expect() {  # expect "fragment" args...
  local want=$1; shift
  local err rc
  err=$("$BIN" "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" <<<"$err" || [ "$(wc -l <<<"$err")" -ne 1 ]; then
    echo "FAIL: nanovllm $* -> rc=$rc, stderr: $err (wanted exit 2 and one line containing: $want)"
    fails=$((fails + 1))
  else
    echo "ok: $want"
  fi
}

model_copy() {  # a corruptible copy of the fixture
  rm -rf "$TMP/m"; mkdir -p "$TMP/m"; cp "$FIX"/*.json "$FIX"/model.safetensors "$TMP/m/"
}
ids() { printf '{"prompt_token_ids": %s}\n' "$1" > "$TMP/in.jsonl"; }
ids '[1, 2, 3]'
G=(generate --device cpu --kv-cache-memory 8000000 --json)

expect "does not exist" "${G[@]}" --model "$TMP/nope" --input "$TMP/in.jsonl"
model_copy; rm "$TMP/m/config.json"
expect "missing config.json" "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"
model_copy; sed -i 's/Qwen3ForCausalLM/Qwen2MoeForCausalLM/' "$TMP/m/config.json"
expect "unsupported architecture 'Qwen2MoeForCausalLM'; supported: Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM" "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"
model_copy; head -c 100000 "$FIX/model.safetensors" > "$TMP/m/model.safetensors"
expect "truncated or corrupt file" "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"
model_copy; printf 'garbage!' | dd of="$TMP/m/model.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
expect "not valid JSON at byte offset" "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"
model_copy; sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 3/' "$TMP/m/config.json"
expect "missing tensor 'model.layers.2." "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"
model_copy; sed -i 's/"intermediate_size": 160/"intermediate_size": 96/' "$TMP/m/config.json"
expect "has shape [160, 64] but the config implies [96, 64]" "${G[@]}" --model "$TMP/m" --input "$TMP/in.jsonl"

ids '[]'
expect "the prompt is empty" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
ids "[$(seq -s, 1 1100 | sed 's/[0-9]\+/5/g')]"
expect "max_model_len" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
ids '[1, 512]'
expect "token id 512 at position 1 is outside the vocabulary [0, 512)" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
ids '[1, 2]'
expect "max_tokens must be at least 1" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" --max-tokens 0
expect "temperature must be a finite number >= 0" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" --temperature -1
expect "top_p must be in (0, 1]" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" --top-p 1.5
expect "top_p must be in (0, 1]" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" --top-p 0
printf '{"prompt_token_ids": [1, 2], "temperature": "hot"}\n' > "$TMP/in.jsonl"
expect "'temperature' must be a number" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 2]\n' > "$TMP/in.jsonl"
expect "in.jsonl:1: not valid JSON" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 2], "x": %s%s}\n' "$(printf '[%.0s' $(seq 100000))" "$(printf ']%.0s' $(seq 100000))" > "$TMP/in.jsonl"
expect "in.jsonl:1: nested deeper than 256 levels" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 18446744073709551615]}\n' > "$TMP/in.jsonl"
expect "'prompt_token_ids' is out of range" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 4294967297]}\n' > "$TMP/in.jsonl"
expect "token id 4294967297 is out of range" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt": "hello"}\n' > "$TMP/in.jsonl"
expect "has no tokenizer" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
expect "is a built-in preset without weights: add --load-format dummy" generate --model qwen3-0.6b --prompt hi
expect "nothing to generate" generate --model "$FIX"
expect "--device" generate --model "$FIX" --device tpu --prompt x
ids '[1, 2]'
expect "--kernel-options: kernel option decode_warps must be 4 or 8 (got '6')" "${G[@]}" --model "$FIX" \
  --input "$TMP/in.jsonl" --kernel-options pdl=off,decode_warps=6
expect "--kernel-options: unknown kernel option 'warps'" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" \
  --kernel-options warps=8
export NANOVLLM_DECODE_SPLITS=32
expect "NANOVLLM_DECODE_SPLITS=32: kernel option max_decode_splits must be an integer in [1, 16]" "${G[@]}" \
  --model "$FIX" --input "$TMP/in.jsonl"
unset NANOVLLM_DECODE_SPLITS
# Structured outputs: JSONL lines take the server's fields, refused as the server refuses them.
printf '{"prompt_token_ids": [1, 2], "guided_json": {"type": "object"}, "guided_regex": "a"}\n' > "$TMP/in.jsonl"
expect "in.jsonl:1: You can only use one kind of structured outputs constraint, but the request has both guided_json and guided_regex" \
  "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 2], "structured_outputs": {"colour": "red"}}\n' > "$TMP/in.jsonl"
expect "in.jsonl:1: 'structured_outputs.colour' is not a structured_outputs field" "${G[@]}" --model "$FIX" \
  --input "$TMP/in.jsonl"
printf '{"prompt_token_ids": [1, 2], "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}\n' \
  > "$TMP/in.jsonl"
expect "response_format.json_schema.schema is required" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl"
ids '[1, 2]'
expect "--structured-outputs-config: backend 'lm-format-enforcer' is not available" "${G[@]}" --model "$FIX" \
  --input "$TMP/in.jsonl" --structured-outputs-config '{"backend": "lm-format-enforcer"}'
expect "--structured-outputs-config: unknown key 'colour'" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" \
  --structured-outputs-config '{"colour": 1}'
expect "--guided-decoding-backend: backend 'lmfe' is not available" "${G[@]}" --model "$FIX" --input "$TMP/in.jsonl" \
  --guided-decoding-backend lmfe

[ $fails -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
