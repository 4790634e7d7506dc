#!/usr/bin/env bash
# Tensor parallelism through the CLI on the CPU (the TCP communicator): `generate
# --tensor-parallel-size 2` starts its second rank itself and gives the outputs of TP=1; two
# ranks started by hand (--rank, --master-addr, --master-port) give the same; bad sizes exit 2
# with one line before anything starts; a killed rank makes the others exit within seconds; a draft
# model and an EAGLE-3 head at TP=2 give the outputs of TP=1 without them.
set -uo pipefail
BIN=${NANOVLLM_BINARY:?}
SRC=${NANOVLLM_SOURCE_DIR:?}
TMP=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

python3 - > "$TMP/in.jsonl" <<'PY'
import json, random
random.seed(3)
for n in (4, 37, 11, 90, 2, 23):
    print(json.dumps({"prompt_token_ids": [random.randrange(3, 500) for _ in range(n)], "max_tokens": 20,
                      "temperature": 0, "ignore_eos": True}))
PY
G=(generate --device cpu --kv-cache-memory 16000000 --block-size 16 --max-num-batched-tokens 64 --max-num-seqs 8 --threads 1 --input "$TMP/in.jsonl" --json)

for model in tiny-qwen3-tied tiny-qwen3-untied; do
  M="$SRC/tests/fixtures/$model"
  "$BIN" "${G[@]}" --model "$M" > "$TMP/tp1.jsonl" || fail "$model TP=1 failed"
  timeout 120 "$BIN" "${G[@]}" --model "$M" --tensor-parallel-size 2 > "$TMP/tp2.jsonl" || fail "$model TP=2 failed"
  if [ -s "$TMP/tp1.jsonl" ] && cmp -s "$TMP/tp1.jsonl" "$TMP/tp2.jsonl"; then echo "ok: $model TP=2 = TP=1 ($(wc -l < "$TMP/tp1.jsonl") requests)"
  else fail "$model: TP=2 output differs from TP=1"; diff "$TMP/tp1.jsonl" "$TMP/tp2.jsonl" | head -5; fi

  # Manual start: rank 1 first (it waits for rank 0), then rank 0, both with explicit addresses.
  port=$(free_port)
  timeout 120 "$BIN" generate --model "$M" --device cpu --threads 1 --tensor-parallel-size 2 --nnodes 1 --node-rank 0 \
    --rank 1 --master-addr 127.0.0.1 --master-port "$port" > "$TMP/worker.out" 2> "$TMP/worker.err" &
  wpid=$!; PIDS+=("$wpid")
  timeout 120 "$BIN" "${G[@]}" --model "$M" --tensor-parallel-size 2 --nnodes 1 --node-rank 0 --rank 0 \
    --master-addr 127.0.0.1 --master-port "$port" > "$TMP/manual.jsonl" || fail "$model manual rank 0 failed"
  wait "$wpid"; wrc=$?
  [ $wrc -eq 0 ] || fail "$model manual rank 1 exited $wrc: $(cat "$TMP/worker.err")"
  [ -s "$TMP/worker.out" ] && fail "$model manual rank 1 printed to stdout"
  if cmp -s "$TMP/tp2.jsonl" "$TMP/manual.jsonl"; then echo "ok: $model manual start = automatic start"
  else fail "$model: manual start differs from the automatic start"; fi
done

# Speculative decoding at TP=2 (the drafter on rank 0 only; rank 1, started by the launcher, gets
# the same flags and ignores them): a draft model (the model itself) gives TP=1's outputs, and so
# does a random EAGLE-3 head shaped for the target (--load-format dummy) against dummy TP=1.
M="$SRC/tests/fixtures/tiny-qwen3-untied"
timeout 120 "$BIN" "${G[@]}" --model "$M" --tensor-parallel-size 2 \
  --speculative-config "{\"model\": \"$M\", \"num_speculative_tokens\": 3}" > "$TMP/draft.jsonl" 2> "$TMP/draft.err" ||
  fail "draft model TP=2 failed: $(cat "$TMP/draft.err")"
if grep -q "speculative-config: draft model" "$TMP/draft.err" && cmp -s "$TMP/tp1.jsonl" "$TMP/draft.jsonl"; then
  echo "ok: draft model at TP=2 = TP=1 without it"
else fail "draft model at TP=2: not running, or output differs from TP=1 ($(cat "$TMP/draft.err"))"; fi
"$BIN" "${G[@]}" --model "$M" --load-format dummy > "$TMP/dummy1.jsonl" || fail "dummy TP=1 failed"
timeout 120 "$BIN" "${G[@]}" --model "$M" --load-format dummy --tensor-parallel-size 2 \
  --speculative-config '{"method": "eagle3", "num_speculative_tokens": 3}' > "$TMP/eagle.jsonl" || fail "EAGLE-3 TP=2 failed"
if [ -s "$TMP/dummy1.jsonl" ] && cmp -s "$TMP/dummy1.jsonl" "$TMP/eagle.jsonl"; then echo "ok: EAGLE-3 at TP=2 = TP=1 without it"
else fail "EAGLE-3 at TP=2: output differs from TP=1"; fi

# Two "nodes" on this host (--nnodes 2, one rank each, ranks from --node-rank): same outputs again.
port=$(free_port)
timeout 120 "$BIN" generate --model "$M" --device cpu --threads 1 --tensor-parallel-size 2 --nnodes 2 --node-rank 1 \
  --master-addr localhost --master-port "$port" 2> "$TMP/node1.err" &
n1=$!; PIDS+=("$n1")
timeout 120 "$BIN" "${G[@]}" --model "$M" --tensor-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr localhost \
  --master-port "$port" > "$TMP/nodes.jsonl" || fail "--nnodes 2: node 0 failed"
wait "$n1" || fail "--nnodes 2: node 1 failed: $(cat "$TMP/node1.err")"
if cmp -s "$TMP/tp2.jsonl" "$TMP/nodes.jsonl"; then echo "ok: --nnodes 2 --node-rank 0/1 = automatic start"
else fail "--nnodes 2 output differs from the automatic start"; fi

# TP=4 needs 4 KV heads: a preset-like config with dummy weights (sharded exactly, so TP=4 = TP=1).
mkdir -p "$TMP/d"
cat > "$TMP/d/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 512, "hidden_size": 64, "intermediate_size": 96,
 "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 16,
 "max_position_embeddings": 512, "eos_token_id": 1}
JSON
"$BIN" "${G[@]}" --model "$TMP/d" --load-format dummy > "$TMP/d1.jsonl" || fail "dummy TP=1 failed"
timeout 120 "$BIN" "${G[@]}" --model "$TMP/d" --load-format dummy --tensor-parallel-size 4 > "$TMP/d4.jsonl" || fail "dummy TP=4 failed"
if [ -s "$TMP/d1.jsonl" ] && cmp -s "$TMP/d1.jsonl" "$TMP/d4.jsonl"; then echo "ok: dummy 16/8-head model TP=4 = TP=1"
else fail "dummy model: TP=4 output differs from TP=1"; fi

expect2() {  # expect2 "fragment" args...: exit 2, one line
  local want=$1; shift
  local err rc
  err=$(timeout 60 "$BIN" "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" <<<"$err" || [ "$(wc -l <<<"$err")" -ne 1 ]; then
    fail "nanovllm $* -> rc=$rc, stderr: $err (wanted exit 2 and one line containing: $want)"
  else echo "ok: $want"; fi
}
U="$SRC/tests/fixtures/tiny-qwen3-untied"
expect2 "--tensor-parallel-size 4 does not divide the model's num_attention_heads (6)" "${G[@]}" --model "$U" --tensor-parallel-size 4
expect2 "--tensor-parallel-size 3 does not divide the model's num_key_value_heads (2)" "${G[@]}" --model "$U" --tensor-parallel-size 3
expect2 "--nnodes 3 does not divide --tensor-parallel-size 2" "${G[@]}" --model "$U" --tensor-parallel-size 2 --nnodes 3
expect2 "--rank must be in [0, 2)" "${G[@]}" --model "$U" --tensor-parallel-size 2 --rank 2 --master-port 1234
expect2 "a manual start needs --master-port" "${G[@]}" --model "$U" --tensor-parallel-size 2 --rank 1
expect2 "needs 2 GPUs per node, but 0 are visible" generate --model "$U" --device cuda --tensor-parallel-size 2 --prompt x

# A long run to kill ranks in.
python3 - > "$TMP/long.jsonl" <<'PY'
import json
for i in range(48):
    print(json.dumps({"prompt_token_ids": [3 + i, 5, 7], "max_tokens": 1000, "temperature": 0, "ignore_eos": True}))
PY
L=(generate --device cpu --kv-cache-memory 64000000 --threads 1 --input "$TMP/long.jsonl" --json)

# Automatic start, the spawned rank 1 killed: rank 0 reports it and fails within seconds.
"$BIN" "${L[@]}" --model "$U" --tensor-parallel-size 2 > /dev/null 2> "$TMP/auto.err" &
r0=$!; PIDS+=("$r0")
child=""
for _ in $(seq 50); do child=$(pgrep -P "$r0" | head -1); [ -n "$child" ] && break; sleep 0.1; done
sleep 1.5
if [ -z "$child" ]; then fail "no worker process under rank 0"; else
  kill -9 "$child"; t0=$(date +%s.%N)
  timeout 20 tail -s 0.1 --pid="$r0" -f /dev/null; rc=0; wait "$r0" || rc=$?
  dt=$(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 2))")
  if [ $rc -ne 0 ] && grep -qE "tensor-parallel rank 1 exited \((killed by signal 9|connection closed|Connection reset by peer)" "$TMP/auto.err" &&
     python3 -c "import sys; sys.exit(0 if $dt < 10 else 1)"; then echo "ok: killed rank 1 -> rank 0 exit $rc in ${dt}s: $(head -1 "$TMP/auto.err")"
  else fail "killed rank 1: rank 0 rc=$rc after ${dt}s, stderr: $(cat "$TMP/auto.err")"; fi
fi

# Manual start, rank 0 killed: the worker exits (code 3) within seconds, no hang.
port=$(free_port)
"$BIN" generate --model "$U" --device cpu --threads 1 --tensor-parallel-size 2 --rank 1 --master-port "$port" 2> "$TMP/w.err" &
w=$!; PIDS+=("$w")
"$BIN" "${L[@]}" --model "$U" --tensor-parallel-size 2 --rank 0 --master-port "$port" > /dev/null 2>&1 &
r0=$!; PIDS+=("$r0")
sleep 2.5
kill -9 "$r0"; wait "$r0" 2>/dev/null; t0=$(date +%s.%N)
timeout 20 tail -s 0.1 --pid="$w" -f /dev/null; rc=0; wait "$w" || rc=$?
dt=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
if [ $rc -eq 3 ] && grep -qF "tensor-parallel rank 0 exited" "$TMP/w.err" && python3 -c "import sys; sys.exit(0 if $dt < 10 else 1)"
then echo "ok: killed rank 0 -> worker exit 3 in ${dt}s: $(head -1 "$TMP/w.err")"
else fail "killed rank 0: worker rc=$rc after ${dt}s, stderr: $(cat "$TMP/w.err")"; fi

[ $fails -eq 0 ] && echo "all tensor-parallel CLI checks passed"
exit $((fails > 0))
