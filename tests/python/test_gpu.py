"""nanovllm's Python API on CUDA (ctest label gpu; the GPU machine): the qwen3-0.6b preset on random
weights gives the CLI's greedy tokens with CUDA graphs and eager, text prompts work (through a
byte-level tokenizer: a fresh GPU machine has no npm data, so no bundled Qwen3 tokenizer), and torch
imports after nanovllm."""
import shutil
import subprocess
import sys
import unittest

from helpers import byte_tokenizer_model, cli_generate_on
from nanovllm import LLM, SamplingParams

PROMPTS = [[(i * 37 + j * 11) % 10000 for j in range(n)] for i, n in enumerate((5, 40, 300, 1000))]


class CudaTest(unittest.TestCase):

    def test_greedy_equals_the_cli(self):
        want = cli_generate_on("cuda", "qwen3-0.6b", [
            {"prompt_token_ids": p, "max_tokens": 32, "temperature": 0, "ignore_eos": True} for p in PROMPTS],
            "--load-format", "dummy", "--max-model-len", "4096")
        tok = byte_tokenizer_model()
        try:
            for eager in (False, True):
                llm = LLM("qwen3-0.6b", load_format="dummy", device="cuda", max_model_len=4096, enforce_eager=eager,
                          tokenizer=tok)
                got = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=32, ignore_eos=True),
                                   use_tqdm=False)
                self.assertEqual([o["token_ids"] for o in got], [w["token_ids"] for w in want], f"eager={eager}")
                text = llm.generate(["Benchmark: "], SamplingParams(max_tokens=8), use_tqdm=False)
                self.assertIsInstance(text[0]["text"], str)
                self.assertEqual(len(text[0]["token_ids"]), 8)
                del llm
        finally:
            shutil.rmtree(tok)

    def test_torch_imports_after_nanovllm(self):
        # nano-vllm's example.py imports nanovllm, then transformers (which imports torch). This aborted
        # in torch's import ("free(): invalid pointer") while the extension exported the libstdc++
        # parts the GPU machine's toolchain links statically (python/CMakeLists.txt: exports.map).
        code = "import nanovllm, torch; print(torch.ones(2, device='cuda').sum().item())"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout.strip(), "2.0")


if __name__ == "__main__":
    unittest.main()
