#!/usr/bin/env bash
# vLLM's Python API on the device machine (issue 43), after scripts/gpu_session.sh built build-gpu:
# nano-vllm's bench.py (tests/python/nanovllm_bench.py, unchanged but for the model path) against
# `nanovllm bench` with bench.py's max_model_len, alternating twice in one call; nano-vllm's
# example.py; and a vLLM-style offline script (RequestOutput, n, logprobs, chat, get_tokenizer) on
# CUDA. Run from the repository root, carrying .deps:   bash scripts/gpu_python_api.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ -d /tmp/deps ]; then
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
fi
export PYTHONPATH=$PWD/build-gpu/python NANOVLLM_MODEL=qwen3-0.6b
B=build-gpu/nanovllm
for rep in 1 2; do
  $B bench --model qwen3-0.6b --load-format dummy --device cuda --max-model-len 4096 | tee -a "$OUT/python_api.jsonl"
  python3 tests/python/nanovllm_bench.py | tee -a "$OUT/python_api.txt"
done
python3 tests/python/nanovllm_example.py > "$OUT/example.txt" 2>&1; echo "example.py rc=$?"; grep -c Completion "$OUT/example.txt"
python3 - <<'PY' 2>&1 | tee -a "$OUT/python_api.txt"
# A vLLM offline script, as vLLM's docs write it (only the import differs).
from nanovllm import LLM, SamplingParams
llm = LLM("qwen3-0.6b", load_format="dummy", max_model_len=4096)
outputs = llm.generate(["Hello, my name is", "The capital of France is"],
                       SamplingParams(temperature=0.8, top_p=0.95, n=2, logprobs=3, seed=0))
for o in outputs:
    print(o.request_id, repr(o.prompt), len(o.outputs), [len(c.token_ids) for c in o.outputs],
          o.outputs[0].finish_reason, round(o.outputs[0].cumulative_logprob, 3), len(o.outputs[0].logprobs[0]))
tok = llm.get_tokenizer()
chat = llm.chat([{"role": "user", "content": "Hi"}], SamplingParams(max_tokens=8, temperature=0))
print("chat:", len(chat[0].prompt_token_ids), chat[0].outputs[0].token_ids, tok.eos_token_id, len(tok), tok.vocab_size)
PY
