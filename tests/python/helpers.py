"""Shared set-up of the Python package tests: the tiny fixtures, a byte-level tokenizer for text
prompts, and the CLI for comparisons. Environment: NANOVLLM_SOURCE_DIR, NANOVLLM_BINARY and
PYTHONPATH=<build>/python (ctest sets them)."""
import json
import os
import shutil
import subprocess
import tempfile

SRC = os.environ["NANOVLLM_SOURCE_DIR"]
BINARY = os.environ["NANOVLLM_BINARY"]
FIXTURE = os.path.join(SRC, "tests", "fixtures", "tiny-qwen3-tied")
# Small enough for CI: the tiny fixture's KV cache.
CPU = dict(device="cpu", kv_cache_memory=16_000_000)


def reference_prompts():
    with open(os.path.join(FIXTURE, "reference.json")) as f:
        return [p["prompt_token_ids"] for p in json.load(f)["prompts"]]


def _byte_to_unicode():  # GPT-2's table: a byte-level BPE vocabulary of the 256 bytes
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _fixture_copy():
    d = tempfile.mkdtemp(prefix="nanovllm-pytest-")
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(FIXTURE, f), d)
    return d


def qwen3_tokenizer_model():
    """A temporary copy of the tiny fixture with the package's Qwen3 tokenizer (the model's 512 ids
    are its first tokens); the caller removes the directory."""
    import nanovllm
    d = _fixture_copy()
    tok = os.path.join(os.path.dirname(nanovllm.__file__), "tokenizers", "qwen3")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), d)
    return d


def byte_tokenizer_model():
    """A temporary copy of the tiny fixture with a byte-level tokenizer (token id = byte, 256 ids
    within its 512: the others have no text) so that text prompts work; the caller removes the
    directory."""
    d = _fixture_copy()
    vocab = {c: b for b, c in _byte_to_unicode().items()}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": []},
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
                   "decoder": {"type": "ByteLevel"}}, f)
    return d


def cli_generate_on(device, model, requests, *flags):
    """`nanovllm generate --json` for request dicts (prompt_token_ids, max_tokens, ...)."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        f.write(lines)
        f.flush()
        out = subprocess.run([BINARY, "generate", "--model", model, "--device", device, "--input", f.name, "--json",
                              *flags], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def cli_generate(model, requests, *flags):
    """The CLI on the CPU with the tiny fixture's KV cache."""
    return cli_generate_on("cpu", model, requests, "--kv-cache-memory", "16000000", *flags)
