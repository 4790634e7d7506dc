#!/usr/bin/env bash
# Hostile model directories at start-up: each is a copy of the tied fixture with one thing
# corrupted (config.json, generation_config.json, model.safetensors, the shard index, the chat
# template), and `nanovllm generate` must print one line naming the problem and exit 2: never a
# crash, a hang (FIFOs) or an "internal error" (exit 1). Then models by Hugging Face id from a hub
# cache laid out as huggingface_hub writes it, and the errors of ids and directories not found.
set -uo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TIED="$SRC/tests/fixtures/tiny-qwen3-tied"
UNTIED="$SRC/tests/fixtures/tiny-qwen3-untied"
M="$TMP/m"
fails=0

printf '{"prompt_token_ids": [1, 2, 3]}\n' > "$TMP/in.jsonl"
G=(generate --device cpu --kv-cache-memory 8000000 --json --max-tokens 2)

check() {  # check EXPECTED_RC "fragment" args...: the exit code, and on failure one stderr line with the fragment
  local want_rc=$1 want=$2; shift 2
  local err rc
  err=$(timeout 60 "$BIN" "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne "$want_rc" ] || { [ "$want_rc" -ne 0 ] && { ! grep -qF -- "$want" <<<"$err" || [ "$(wc -l <<<"$err")" -ne 1 ]; }; }; then
    echo "FAIL: $CASE -> rc=$rc (wanted $want_rc), stderr: ${err:0:400} (wanted one line containing: $want)"
    fails=$((fails + 1))
  else
    echo "ok: $CASE"
  fi
}
expect() { check 2 "$@" "${G[@]}" --model "$M" --input "$TMP/in.jsonl"; }

fresh() { rm -rf "$M"; mkdir -p "$M"; cp "$TIED"/*.json "$TIED"/model.safetensors "$M/"; }
fresh_untied() { rm -rf "$M"; cp -r "$UNTIED" "$M"; }
# json_edit FILE 'python statements on j': rewrites a JSON file.
json_edit() { python3 -c "import json, sys; p = sys.argv[1]; j = json.load(open(p)); exec(sys.argv[2]); json.dump(j, open(p, 'w'))" "$1" "$2"; }
config() { CASE="config.json: $1"; fresh; json_edit "$M/config.json" "$1"; }
# header_edit 'python statements on h': rewrites the header of model.safetensors.
header_edit() {
  python3 - "$M/model.safetensors" "$1" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
exec(sys.argv[2])
hb = json.dumps(h).encode()
open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + data)
PY
}
header() { CASE="model.safetensors header: $1"; fresh; header_edit "$1"; }

CASE="the fixture itself"; fresh; check 0 "" "${G[@]}" --model "$M" --input "$TMP/in.jsonl"

# --- config.json: absurd sizes, wrong types, features we do not implement
config "j['hidden_size'] = 2**40"
expect "config.json: 'hidden_size' must be an integer in [1, 1048576] (got 1099511627776)"
config "j['num_hidden_layers'] = 10**9"
expect "config.json: 'num_hidden_layers' must be an integer in [1, 4096] (got 1000000000)"
config "j['vocab_size'] = -5"
expect "config.json: 'vocab_size' must be an integer in [1, 16777216] (got -5)"
config "j['intermediate_size'] = 2**50"
expect "config.json: 'intermediate_size' must be an integer in [1, 4194304]"
config "j['num_attention_heads'] = 0"
expect "config.json: 'num_attention_heads' must be an integer in [1, 4096] (got 0)"
config "j['num_key_value_heads'] = 3"
expect "num_attention_heads (4) is not a multiple of num_key_value_heads (3)"
config "j['head_dim'] = 2**40"
expect "config.json: 'head_dim' must be an integer in [2, 4096]"
config "j['hidden_size'] = 2**20; j['intermediate_size'] = 2**19"
expect "parameters, more than the 2^40 accepted"
config "j['hidden_size'] = 2**19; j['vocab_size'] = 2**19"
expect "parameters, but the checkpoint holds 143808"
config "j['rms_norm_eps'] = 'x'"
expect "config.json: 'rms_norm_eps' must be a number in (0.0, 1.0] (got \"x\")"
config "j['architectures'] = [5]"
expect "config.json: 'architectures' must be a list of one architecture name (got [5])"
config "j['rope_parameters']['rope_type'] = 5"
expect "config.json: 'rope_parameters': 'rope_type' must be a string (got 5)"
config "j['eos_token_id'] = 2**40"
expect "config.json: 'eos_token_id' must be an integer in [0, 511]"
config "j['attention_bias'] = True"
expect "config.json: 'attention_bias' is true (biases in the q/k/v/o projections), which is not implemented"
config "j['hidden_act'] = 'gelu'"
expect "config.json: 'hidden_act' is 'gelu', which is not implemented (only silu)"
config "j['rope_scaling'] = {'rope_type': 'longrope', 'factor': 4.0}"
expect "config.json: 'rope_scaling' has RoPE type 'longrope', which is not implemented"
config "j['rope_scaling'] = {'rope_type': 'yarn', 'factor': -4.0}"
expect "config.json: 'rope_scaling': 'factor' must be a number in (0.0, 1000000.0] (got -4.0)"
config "j['rope_scaling'] = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 256}"
CASE="config.json: YaRN runs"; check 0 "" "${G[@]}" --model "$M" --input "$TMP/in.jsonl"
CASE="config.json: YaRN, --max-model-len past factor * original"
check 2 "--max-model-len 1025 is larger than the model's 1024 (YaRN factor 4 * original_max_position_embeddings 256)" \
  "${G[@]}" --model "$M" --input "$TMP/in.jsonl" --max-model-len 1025
config "j['quantization_config'] = {'quant_method': 'bitsandbytes'}"
expect "quantized checkpoints are not implemented"
config "j['use_sliding_window'] = True; j['sliding_window'] = 16; j['layer_types'][1] = 'sliding_attention'"
CASE="config.json: sliding window (implemented), --max-model-len past it"; check 0 "" "${G[@]}" --model "$M" --input "$TMP/in.jsonl" --max-model-len 17
CASE="config.json: sliding window, --max-model-len unset"; check 0 "" "${G[@]}" --model "$M" --input "$TMP/in.jsonl"
CASE="config.json: a FIFO"; fresh; rm "$M/config.json"; mkfifo "$M/config.json"
expect "config.json: not a regular file (it is a FIFO)"
CASE="generation_config.json: a FIFO"; fresh; rm "$M/generation_config.json"; mkfifo "$M/generation_config.json"
expect "generation_config.json: not a regular file (it is a FIFO)"
CASE="generation_config.json: eos_token_id a string"; fresh; json_edit "$M/generation_config.json" "j['eos_token_id'] = ['1']"
expect "generation_config.json: 'eos_token_id[0]' must be an integer in [0, 511] (got \"1\")"

# --- model.safetensors: not a regular file, wrong JSON types, sizes that overflow
CASE="model.safetensors: a FIFO"; fresh; rm "$M/model.safetensors"; mkfifo "$M/model.safetensors"
expect "model.safetensors: not a regular file (it is a FIFO)"
CASE="model.safetensors: a directory"; fresh; rm "$M/model.safetensors"; mkdir "$M/model.safetensors"
expect "model.safetensors: not a regular file (it is a directory)"
CASE="model.safetensors: a link to /dev/zero"; fresh; rm "$M/model.safetensors"; ln -s /dev/zero "$M/model.safetensors"
expect "model.safetensors: not a regular file (it is a character device)"
header "h['model.norm.weight']['dtype'] = 5"
expect "model.safetensors: tensor 'model.norm.weight': \"dtype\" must be a string such as \"BF16\" (got number)"
header "h['model.norm.weight']['shape'] = 64"
expect "tensor 'model.norm.weight': \"shape\" must be an array of sizes (got number)"
header "h['model.norm.weight']['shape'] = [2**62, 4]"
expect "tensor 'model.norm.weight' has shape [4611686018427387904,4], whose size does not fit in 64 bits"
header "h['__metadata__'] = 5"
expect "model.safetensors: \"__metadata__\" must be an object (got number)"

# --- model.safetensors.index.json
CASE="index: a weight_map value that is a number"; fresh_untied
json_edit "$M/model.safetensors.index.json" "j['weight_map']['lm_head.weight'] = 7"
expect "model.safetensors.index.json: weight_map['lm_head.weight'] must be a file name string (got number)"
CASE="index: a weight_map value outside the directory"; fresh_untied
json_edit "$M/model.safetensors.index.json" "j['weight_map']['lm_head.weight'] = '/etc/passwd'"
expect "weight_map['lm_head.weight'] = '/etc/passwd' does not name a file inside the model directory"
CASE="index: weight_map a list"; fresh_untied; json_edit "$M/model.safetensors.index.json" "j['weight_map'] = [1]"
expect "model.safetensors.index.json: missing 'weight_map' object"
CASE="index: a FIFO"; fresh_untied; rm "$M/model.safetensors.index.json"; mkfifo "$M/model.safetensors.index.json"
expect "model.safetensors.index.json: not a regular file (it is a FIFO)"

# --- the chat template (tokenizer_config.json), parsed at start-up
with_template() {  # with_template 'python expression giving the template'
  CASE="chat template: ${1:0:60}"; fresh
  python3 - "$M" "$1" <<'PY'
import json, sys
d = sys.argv[1]
def b2u():  # GPT-2's byte-to-unicode table: a byte-level vocabulary of the 256 bytes
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
vocab = {c: b for b, c in b2u().items()}
json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"}}, open(d + "/tokenizer.json", "w"))
json.dump({"chat_template": eval(sys.argv[2])}, open(d + "/tokenizer_config.json", "w"))
PY
}
with_template "\"{{ 'x'\" + '|trim' * 200000 + ' }}'"
expect "chat template syntax error: template nested too deeply (more than 200 levels"
with_template "'{{ x' + '.a' * 200000 + ' }}'"
expect "chat template syntax error: template nested too deeply"
with_template "'{{ 1' + ' + 1' * 200000 + ' }}'"
expect "chat template syntax error: template nested too deeply"
with_template "'{{ ' + '(' * 100000 + '1' + ')' * 100000 + ' }}'"
expect "chat template syntax error: template nested too deeply"
with_template "'{% if x %}' * 100000"
expect "chat template syntax error: template nested too deeply"
with_template "'{% for m in messages %}{% set x = [] %}{% for i in range(300000) %}{% set x = [x] %}{% endfor %}{{ m.content }}{% endfor %}'"
CASE="chat template nesting 300,000 lists renders"
check 0 "" "${G[@]}" --model "$M" --prompt hi --chat

# --- models by Hugging Face id, from a cache laid out as huggingface_hub writes it: blobs named by
# their etag (sha256 of an LFS file, git blob sha1 of the others), snapshots/<commit>/ of relative
# links into ../../blobs/, refs/<revision> holding the commit without a newline. Nothing is
# downloaded; the user's own cache is never looked at.
unset HF_HOME HUGGINGFACE_HUB_CACHE XDG_CACHE_HOME
export HF_HUB_CACHE="$TMP/empty-hub"
hf_snapshot() {  # hf_snapshot ROOT ORG/NAME COMMIT SRC_DIR FILES...
  python3 - "$@" <<'PY'
import hashlib, os, sys
root, repo_id, commit, src = sys.argv[1:5]
folder = "models--" + repo_id.replace("/", "--")
repo = os.path.join(root, folder)
os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
os.makedirs(os.path.join(root, ".locks", folder), exist_ok=True)
snap = os.path.join(repo, "snapshots", commit)
os.makedirs(snap, exist_ok=True)
for f in sys.argv[5:]:
    data = open(os.path.join(src, f), "rb").read()
    lfs = f.endswith(".safetensors")
    h = hashlib.sha256(data).hexdigest() if lfs else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    blob = os.path.join(repo, "blobs", h)
    if not os.path.exists(blob):
        open(blob, "wb").write(data)
    dst = os.path.join(snap, f)
    os.symlink(os.path.relpath(blob, os.path.dirname(dst)), dst)
PY
}
hf_ref() { mkdir -p "$1/models--${2/\//--}/refs/$(dirname "$3")"; printf '%s' "$4" > "$1/models--${2/\//--}/refs/$3"; }
C1=1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c
C2=aaaabbbbccccddddeeeeffff0000111122223333
fresh; with_template "'{{ messages[0].content }}'"  # $M: the tied fixture + a byte-level tokenizer
FILES=(config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json)
hf_snapshot "$TMP/hub" tiny-org/Tiny-Qwen3 $C1 "$M" "${FILES[@]}"
hf_ref "$TMP/hub" tiny-org/Tiny-Qwen3 main $C1
hf_snapshot "$TMP/hub" tiny-org/Tiny-Qwen3 $C2 "$M" "${FILES[@]}"
hf_ref "$TMP/hub" tiny-org/Tiny-Qwen3 v1.0 $C2
cp -r "$TMP/hub" "$TMP/dl"
printf '{"prompt": "hello"}\n' > "$TMP/text.jsonl"
want=$(timeout 60 "$BIN" "${G[@]}" --model "$M" --input "$TMP/text.jsonl" 2>/dev/null)
same() {  # same CASE ENV... -- ARGS...: generates what the directory generates
  CASE=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local got rc
  got=$(env "${envs[@]}" timeout 60 "$BIN" "${G[@]}" "$@" --input "$TMP/text.jsonl" 2>"$TMP/err"); rc=$?
  if [ $rc -ne 0 ] || [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "FAIL: $CASE -> rc=$rc, stdout: ${got:0:300} (wanted: ${want:0:300}), stderr: $(head -c 400 "$TMP/err")"
    fails=$((fails + 1))
  else
    echo "ok: $CASE"
  fi
}
mkdir -p "$TMP/home" "$TMP/home2/.cache/huggingface"
cp -r "$TMP/hub" "$TMP/home/hub"
cp -r "$TMP/hub" "$TMP/home2/.cache/huggingface/hub"
same "id via HF_HUB_CACHE (refs/main)" HF_HUB_CACHE="$TMP/hub" -- tiny-org/Tiny-Qwen3
same "id via HF_HOME/hub" -u HF_HUB_CACHE HF_HOME="$TMP/home" -- tiny-org/Tiny-Qwen3
same "id via ~/.cache/huggingface/hub" -u HF_HUB_CACHE HOME="$TMP/home2" -- tiny-org/Tiny-Qwen3
same "id at a tag (--revision v1.0)" HF_HUB_CACHE="$TMP/hub" -- tiny-org/Tiny-Qwen3 --revision v1.0
same "id at a commit hash" HF_HUB_CACHE="$TMP/hub" -- --model tiny-org/Tiny-Qwen3 --revision $C2
same "id via --download-dir" HF_HUB_CACHE="$TMP/empty-hub" -- tiny-org/Tiny-Qwen3 --download-dir "$TMP/dl"
same "--tokenizer as an id" HF_HUB_CACHE="$TMP/hub" -- "$M" --tokenizer tiny-org/Tiny-Qwen3 --tokenizer-revision v1.0

CASE="an id not in the cache"
check 2 "model 'tiny-org/Other': no such directory, and the Hugging Face id tiny-org/Other (revision main) is not in the local Hugging Face cache (searched $TMP/empty-hub/models--tiny-org--Other). Nothing is downloaded: get the files with \`huggingface-cli download tiny-org/Other\` (or \`hf download tiny-org/Other\`), or pass a local directory" \
  "${G[@]}" tiny-org/Other --input "$TMP/in.jsonl"
CASE="an id cached, not at that revision"
check 2 "(revision v2) is in the local Hugging Face cache ($TMP/dl) but not at revision v2" \
  "${G[@]}" tiny-org/Tiny-Qwen3 --revision v2 --download-dir "$TMP/dl" --input "$TMP/in.jsonl"
CASE="--code-revision is accepted with a note"
err=$(HF_HUB_CACHE="$TMP/hub" timeout 60 "$BIN" "${G[@]}" tiny-org/Tiny-Qwen3 --code-revision main --input "$TMP/in.jsonl" 2>&1 >/dev/null)
if grep -q "note: --code-revision main accepted" <<<"$err"; then echo "ok: $CASE"; else echo "FAIL: $CASE: $err"; fails=$((fails + 1)); fi
for cmd in "generate --prompt hi" serve; do
  CASE="$cmd: a directory that does not exist"
  check 2 "model directory '$TMP/no-such-dir' does not exist" $cmd --device cpu "$TMP/no-such-dir"
  CASE="$cmd: a relative directory that does not exist"
  check 2 "model directory './no/such/dir' does not exist" $cmd --device cpu ./no/such/dir
done
CASE="a snapshot without config.json"
rm "$TMP/dl/models--tiny-org--Tiny-Qwen3/snapshots/$C2/config.json"
check 2 "model 'tiny-org/Tiny-Qwen3' (revision v1.0): the cached snapshot $TMP/dl/models--tiny-org--Tiny-Qwen3/snapshots/$C2 has no config.json" \
  "${G[@]}" tiny-org/Tiny-Qwen3 --revision v1.0 --download-dir "$TMP/dl" --input "$TMP/in.jsonl"

[ $fails -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
