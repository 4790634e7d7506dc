"""Tensor parallelism from Python on the CPU: LLM(..., tensor_parallel_size=2) starts the second
rank (the package's nanovllm executable, as the CLI starts it), gives the outputs of one rank,
and its rank is gone once the LLM is; bad sizes are ValueErrors before anything starts."""
import gc
import os
import time
import unittest

from helpers import CPU, FIXTURE, reference_prompts
from nanovllm import LLM, SamplingParams


def children():
    """This process's child processes (pids), from /proc."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except OSError:
                pass
    return out


class TensorParallelTest(unittest.TestCase):

    def test_two_ranks_equal_one(self):
        prompts = reference_prompts()
        sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
        want = LLM(FIXTURE, **CPU).generate(prompts, sp, use_tqdm=False)
        before = set(children())
        llm = LLM(FIXTURE, tensor_parallel_size=2, num_threads=1, **CPU)
        self.assertEqual(len(set(children()) - before), 1)  # rank 1
        self.assertEqual(llm.generate(prompts, sp, use_tqdm=False), want)
        del llm
        gc.collect()
        deadline = time.monotonic() + 15
        while set(children()) - before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(set(children()) - before, set())

    def test_bad_sizes_fail_before_starting(self):
        before = set(children())
        with self.assertRaisesRegex(ValueError, "tensor_parallel_size 3 does not divide"):
            LLM(FIXTURE, tensor_parallel_size=3, **CPU)
        with self.assertRaisesRegex(ValueError, "tensor_parallel_size must be positive"):
            LLM(FIXTURE, tensor_parallel_size=0, **CPU)
        self.assertEqual(set(children()) - before, set())


if __name__ == "__main__":
    unittest.main()
