#!/usr/bin/env bash
# The README's set-up line for the Python package, offline: `pip install --no-build-isolation .`
# into a venv with the system's packages (Debian's setuptools and wheel), reusing this build
# (NANOVLLM_BUILD_DIR); then, from another directory, nano-vllm's import and a generate, a
# built-in preset's text prompt using the tokenizer shipped in the package.
set -euo pipefail
SRC=${NANOVLLM_SOURCE_DIR:?}
PY=${NANOVLLM_PYTHON:?}
: "${NANOVLLM_BUILD_DIR:?}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PY" -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/python" -m pip install --no-build-isolation --no-index -q "$SRC" >"$TMP/pip.log" 2>&1 ||
  { cat "$TMP/pip.log"; exit 1; }
cd "$TMP"
env -u PYTHONPATH "$TMP/venv/bin/python" - "$SRC" "$TMP" <<'PY'
import os, sys
from nanovllm import LLM, SamplingParams
import nanovllm
src, tmp = sys.argv[1:]
assert nanovllm.__file__.startswith(os.path.join(tmp, "venv")), nanovllm.__file__
llm = LLM(os.path.join(src, "tests/fixtures/tiny-qwen3-tied"), device="cpu", kv_cache_memory=16_000_000)
out = llm.generate([[3, 4, 5]], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True), use_tqdm=False)
assert len(out[0]["token_ids"]) == 4, out
# A preset with dummy weights takes text through the package's Qwen3 tokenizer (bench.py's warm-up).
llm = LLM("qwen3-0.6b", load_format="dummy", device="cpu", max_model_len=64, kv_cache_memory=64_000_000)
out = llm.generate(["Benchmark: "], SamplingParams(max_tokens=2), use_tqdm=False)
assert len(out[0]["token_ids"]) == 2 and isinstance(out[0]["text"], str), out
print("ok: installed", nanovllm.__file__)
PY
"$TMP/venv/bin/python" -m pip uninstall -y -q nanovllm
