# nano-vllm's example.py (commit bb823b3), on this engine: only the model differs: NANOVLLM_MODEL
# (default nano-vllm's ~/huggingface/Qwen3-0.6B/); a built-in preset (qwen3-0.6b) runs on random
# weights (load_format="dummy", gibberish text) with the package's Qwen3 tokenizer. Needs
# transformers for the chat template, as nano-vllm's does.
import os
import nanovllm
from nanovllm import LLM, SamplingParams
from transformers import AutoTokenizer


def main():
    path = os.path.expanduser(os.environ.get("NANOVLLM_MODEL", "~/huggingface/Qwen3-0.6B/"))
    preset = not os.path.isdir(path)
    tokenizer_path = os.path.join(os.path.dirname(nanovllm.__file__), "tokenizers", "qwen3") if preset else path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    llm = LLM(path, enforce_eager=True, tensor_parallel_size=1, **({"load_format": "dummy"} if preset else {}))

    sampling_params = SamplingParams(temperature=0.6, max_tokens=256)
    prompts = [
        "introduce yourself",
        "list all prime numbers within 100",
    ]
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for prompt in prompts
    ]
    outputs = llm.generate(prompts, sampling_params)

    for prompt, output in zip(prompts, outputs):
        print("\n")
        print(f"Prompt: {prompt!r}")
        print(f"Completion: {output['text']!r}")


if __name__ == "__main__":
    main()
