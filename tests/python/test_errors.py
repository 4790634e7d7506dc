"""Bad arguments to nanovllm's Python API: unknown keywords are TypeErrors naming them, wrong
types TypeErrors, bad values ValueErrors with the engine's messages; a failed call leaves the
engine usable. Ctrl-C (SIGINT) ends a long generate with KeyboardInterrupt."""
import os
import signal
import threading
import time
import unittest

from helpers import CPU, FIXTURE, reference_prompts
from nanovllm import LLM, SamplingParams


class ConstructionErrorsTest(unittest.TestCase):

    def test_unknown_keywords_are_named(self):
        with self.assertRaisesRegex(TypeError, "'max_num_seq'"):
            LLM(FIXTURE, max_num_seq=4, **CPU)
        with self.assertRaisesRegex(TypeError, "'bogus', 'other'"):
            LLM(FIXTURE, other=1, bogus=2, **CPU)

    def test_wrong_types(self):
        with self.assertRaisesRegex(TypeError, "max_num_seqs must be an int"):
            LLM(FIXTURE, max_num_seqs="8", **CPU)
        with self.assertRaisesRegex(TypeError, "enforce_eager must be a bool"):
            LLM(FIXTURE, enforce_eager=1, **CPU)
        with self.assertRaisesRegex(TypeError, "model must be a str"):
            LLM(7)

    def test_bad_values_name_the_keyword(self):
        with self.assertRaisesRegex(ValueError, "max_num_seqs must be positive"):
            LLM(FIXTURE, max_num_seqs=0, **CPU)
        with self.assertRaisesRegex(ValueError, "gpu_memory_utilization must be in"):
            LLM(FIXTURE, gpu_memory_utilization=1.5, **CPU)
        with self.assertRaisesRegex(ValueError, "kvcache_block_size must be positive"):
            LLM(FIXTURE, kvcache_block_size=-1, **CPU)
        with self.assertRaisesRegex(ValueError, "device must be cpu, cuda or auto"):
            LLM(FIXTURE, device="tpu")
        with self.assertRaisesRegex(ValueError, "load_format must be"):
            LLM(FIXTURE, load_format="gguf", **CPU)
        with self.assertRaisesRegex(ValueError, "eos: derived from the model"):
            LLM(FIXTURE, eos=5, **CPU)
        with self.assertRaisesRegex(ValueError, "kv_cache_dtype fp8_e5m2: not implemented"):
            LLM(FIXTURE, kv_cache_dtype="fp8_e5m2", **CPU)
        with self.assertRaisesRegex(TypeError, "kv_cache_dtype must be a str"):
            LLM(FIXTURE, kv_cache_dtype=8, **CPU)
        with self.assertRaisesRegex(ValueError, "quantization bitsandbytes: not implemented"):
            LLM(FIXTURE, quantization="bitsandbytes", **CPU)
        with self.assertRaisesRegex(TypeError, "quantization must be"):
            LLM(FIXTURE, quantization=8, **CPU)

    def test_bad_models(self):
        with self.assertRaisesRegex(ValueError, "/no/such/model"):
            LLM("/no/such/model", **CPU)
        with self.assertRaisesRegex(ValueError, "load-format dummy|load_format dummy"):
            LLM("qwen3-0.6b", **CPU)

    def test_nano_vllm_defaults_are_accepted(self):
        llm = LLM(FIXTURE, num_kvcache_blocks=-1, eos=-1, hf_config=None, enforce_eager=True,
                  tensor_parallel_size=1, max_model_len=256, max_num_seqs=16, max_num_batched_tokens=1024,
                  kvcache_block_size=16, **CPU)
        out = llm.generate([[3, 4, 5]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True),
                           use_tqdm=False)
        self.assertEqual(len(out[0]["token_ids"]), 3)

    def test_fp8_kv_cache(self):
        llm = LLM(FIXTURE, kv_cache_dtype="fp8", **CPU)
        out = llm.generate([[3, 4, 5]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True),
                           use_tqdm=False)
        self.assertEqual(len(out[0]["token_ids"]), 3)


class SamplingParamsErrorsTest(unittest.TestCase):

    def test_unknown_keyword(self):
        with self.assertRaisesRegex(TypeError, "max_token"):
            SamplingParams(max_token=3)

    def test_bad_values(self):
        with self.assertRaisesRegex(ValueError, "temperature must be"):
            SamplingParams(temperature=-1)
        with self.assertRaisesRegex(ValueError, "max_tokens must be at least 1"):
            SamplingParams(max_tokens=0)
        with self.assertRaisesRegex(ValueError, "top_p must be in"):
            SamplingParams(top_p=0)
        with self.assertRaisesRegex(ValueError, "repetition_penalty"):
            SamplingParams(repetition_penalty=0)
        with self.assertRaisesRegex(TypeError, "max_tokens must be an int"):
            SamplingParams(max_tokens=3.5)
        with self.assertRaisesRegex(TypeError, "stop must be"):
            SamplingParams(stop=[1])

    def test_defaults_are_vllms_and_nano_vllms_order(self):
        sp = SamplingParams()
        self.assertEqual((sp.temperature, sp.max_tokens, sp.ignore_eos, sp.n, sp.top_k, sp.top_p, sp.detokenize),
                         (1.0, 16, False, 1, 0, 1.0, True))  # vLLM's (nano-vllm's max_tokens was 64)
        self.assertEqual(SamplingParams(0.6, 10, True).max_tokens, 10)  # nano-vllm's positional order
        with self.assertRaises(TypeError):
            SamplingParams(0.6, 10, True, 2)  # the rest are keywords


class RequestErrorsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(FIXTURE, **CPU)
        cls.sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)

    def tearDown(self):
        # Whatever failed, the engine is left with nothing queued and still generates.
        self.assertTrue(self.llm.is_finished())
        out = self.llm.generate([[5, 6]], self.sp, use_tqdm=False)
        self.assertEqual(len(out[0]["token_ids"]), 4)

    def test_bad_prompts(self):
        with self.assertRaisesRegex(TypeError, r"prompts\[1\] must be a str or a list of int"):
            self.llm.generate([[1, 2], [1, "x"]], self.sp)
        with self.assertRaisesRegex(ValueError, "request 1: .*512|vocab"):
            self.llm.generate([[1, 2], [1, 100000]], self.sp)
        with self.assertRaisesRegex(ValueError, "empty"):
            self.llm.generate([[]], self.sp)
        with self.assertRaisesRegex(ValueError, "no tokenizer"):
            self.llm.generate(["text without a tokenizer"], self.sp)

    def test_bad_sampling_params(self):
        with self.assertRaisesRegex(ValueError, "must be the same \\(3 prompts, 2 sampling params\\)"):
            self.llm.generate([[1], [2], [3]], [self.sp, self.sp])
        with self.assertRaisesRegex(TypeError, "SamplingParams"):
            self.llm.generate([[1]], {"temperature": 0})
        sp = SamplingParams()
        sp.temperature = -2.0  # changed after construction: checked again at use
        with self.assertRaisesRegex(ValueError, "temperature"):
            self.llm.generate([[1]], sp)

    def test_too_long_for_the_model(self):
        with self.assertRaisesRegex(ValueError, "max_model_len|context|long"):
            self.llm.generate([[1] * 2000], SamplingParams(max_tokens=100))

    def test_bad_add_request(self):
        with self.assertRaisesRegex(ValueError, "empty"):
            self.llm.add_request([], self.sp)


class InterruptTest(unittest.TestCase):

    def test_ctrl_c_interrupts_generate(self):
        llm = LLM(FIXTURE, **CPU)
        prompts = [[i % 500 + 3] * 8 for i in range(64)]
        long = SamplingParams(temperature=0, max_tokens=1000, ignore_eos=True)
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        t0 = time.monotonic()
        timer.start()
        with self.assertRaises(KeyboardInterrupt):
            llm.generate(prompts, long, use_tqdm=False)
        elapsed = time.monotonic() - t0
        timer.join()
        self.assertLess(elapsed, 10, "the interrupt was not seen between steps")
        # The call's requests are aborted: the engine is idle and usable.
        self.assertTrue(llm.is_finished())
        out = llm.generate([[5, 6]], SamplingParams(temperature=0, max_tokens=2, ignore_eos=True), use_tqdm=False)
        self.assertEqual(len(out[0]["token_ids"]), 2)


if __name__ == "__main__":
    unittest.main()
