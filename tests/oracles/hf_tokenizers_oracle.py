"""The tokenizer reference from Python, for machines that have the `tokenizers` wheel (the GPU
machine does): the same Rust library that CI runs through its Node bindings (tokenize_oracle.mjs).

    python3 hf_tokenizers_oracle.py <tokenizer.json> <in.json> <out.json>

in.json: ["text", ...] -> out.json: [[ids], ...], encoded without special tokens (no BOS).
"""
import json
import sys

from tokenizers import Tokenizer


def main() -> None:
    tok_path, in_path, out_path = sys.argv[1:4]
    tok = Tokenizer.from_file(tok_path)
    with open(in_path, encoding="utf-8") as f:
        texts = json.load(f)
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(ids, f)


if __name__ == "__main__":
    main()
