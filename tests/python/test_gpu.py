"""nanovllm's Python API on CUDA (ctest label gpu; the GPU machine): the qwen3-0.6b preset on random
weights gives the CLI's greedy tokens with CUDA graphs and eager, and text prompts work through
the package's tokenizer."""
import unittest

from helpers import cli_generate_on
from nanovllm import LLM, SamplingParams

PROMPTS = [[(i * 37 + j * 11) % 10000 for j in range(n)] for i, n in enumerate((5, 40, 300, 1000))]


class CudaTest(unittest.TestCase):

    def test_greedy_equals_the_cli(self):
        want = cli_generate_on("cuda", "qwen3-0.6b", [
            {"prompt_token_ids": p, "max_tokens": 32, "temperature": 0, "ignore_eos": True} for p in PROMPTS],
            "--load-format", "dummy", "--max-model-len", "4096")
        for eager in (False, True):
            llm = LLM("qwen3-0.6b", load_format="dummy", device="cuda", max_model_len=4096, enforce_eager=eager)
            got = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=32, ignore_eos=True),
                               use_tqdm=False)
            self.assertEqual([o["token_ids"] for o in got], [w["token_ids"] for w in want], f"eager={eager}")
            text = llm.generate(["Benchmark: "], SamplingParams(max_tokens=8), use_tqdm=False)
            self.assertIsInstance(text[0]["text"], str)
            del llm


if __name__ == "__main__":
    unittest.main()
