#!/usr/bin/env bash
# `nanovllm tokenize` (text -> ids; chat messages -> rendered prompt + ids) equals the reference
# packages (Hugging Face `tokenizers` + @huggingface/jinja) on the Qwen3 preset's tokenizer; the
# last line checks that tool schemas keep the key order they were given (not sorted).
set -euo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/in.jsonl" <<'JSONL'
{"text": "Hello, world! Don't stop—naïve café 你好 🇯🇵 <|im_start|>user\n\tcode();  "}
{"text": "   leading spaces and trailing\r\n\r\n"}
{"text": "NEL\u0085 it'S \ud884\udf50's \ud87a\udff0'LL \ud803\udd50\ud803\udd40 a\u0345\u07fd \u180e\u2028 end"}
{"messages": [{"content": "You are terse.", "role": "system"}, {"content": "What is 2+2?", "role": "user"}], "add_generation_prompt": true}
{"messages": [{"content": "Hi", "role": "user"}, {"content": "Hello!", "reasoning_content": "Greet back.", "role": "assistant"}, {"content": "Weather?", "role": "user"}], "add_generation_prompt": true, "enable_thinking": false}
{"messages": [{"content": "Weather in Paris?", "role": "user"}], "tools": [{"function": {"description": "Get weather", "name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}}, "type": "function"}], "add_generation_prompt": true}
{"messages": [{"content": "Weather in Paris?", "role": "user"}, {"content": "", "role": "assistant", "tool_calls": [{"function": {"arguments": {"city": "Paris"}, "name": "get_weather"}, "type": "function"}]}, {"content": "{\"temp\": 21}", "role": "tool"}], "add_generation_prompt": true}
{"messages": [{"role": "user", "content": "Book it"}], "tools": [{"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {"when": {"type": "string"}, "at": {"type": "string"}}}}}], "add_generation_prompt": true}
JSONL
"$BIN" tokenize --model qwen3-0.6b --input "$TMP/in.jsonl" > "$TMP/ours.jsonl"
node "$SRC/tests/e2e/tokenize_cli_oracle.mjs" "$SRC/tests/oracles" "$TMP/in.jsonl" > "$TMP/ref.jsonl"
python3 - "$TMP/ours.jsonl" "$TMP/ref.jsonl" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
ref = [json.loads(l) for l in open(sys.argv[2])]
assert len(ours) == len(ref) == 8, (len(ours), len(ref))
for i, (o, r) in enumerate(zip(ours, ref)):
    assert o.get("text") == r.get("text"), f"line {i + 1}: rendered text differs:\n{o.get('text')!r}\n{r.get('text')!r}"
    assert o["ids"] == r["ids"], f"line {i + 1}: ids differ"
print(f"ok: {len(ours)} lines identical to the reference")
PY
# Errors name the line and the problem, exit 2.
printf '{"text": 5}\n' > "$TMP/bad.jsonl"
if "$BIN" tokenize --model qwen3-0.6b --input "$TMP/bad.jsonl" 2> "$TMP/err"; then echo "accepted a bad line"; exit 1; fi
grep -q "bad.jsonl:1: needs a string 'text' or 'messages'" "$TMP/err" || { cat "$TMP/err"; exit 1; }
