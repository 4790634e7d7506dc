"""nanovllm's Python API on the CPU backend with the tiny fixtures: outputs, greedy equality with
the CLI, sampling params as one or a list, token-id and text prompts, the LLMEngine loop, structured
outputs' parameters."""
import os
import shutil
import subprocess
import unittest

from helpers import CPU, FIXTURE, byte_tokenizer_model, cli_generate, qwen3_tokenizer_model, reference_prompts
import nanovllm
from nanovllm import GuidedDecodingParams, LLM, LLMEngine, SamplingParams, StructuredOutputsParams


def samples(outs):
    """What a request's samples hold (request ids differ between calls)."""
    return [[(c.index, c.text, c.token_ids, c.finish_reason, c.stop_reason) for c in o.outputs] for o in outs]


class GenerateTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(FIXTURE, **CPU)

    def test_a_request_output_per_prompt_in_order(self):
        prompts = reference_prompts()[:4]
        outs = self.llm.generate(prompts, SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
                                 use_tqdm=False)
        self.assertEqual(len(outs), 4)
        for p, o in zip(prompts, outs):
            self.assertIsInstance(o, nanovllm.RequestOutput)
            self.assertEqual(o.prompt_token_ids, p)
            self.assertTrue(o.finished)
            self.assertEqual(len(o.outputs), 1)
            c = o.outputs[0]
            self.assertEqual((c.index, c.finish_reason, c.stop_reason), (0, "length", None))
            self.assertIsNone(c.logprobs)
            self.assertIsNone(c.cumulative_logprob)
            # nano-vllm's dict view of the first sample
            self.assertEqual(set(o), {"text", "token_ids"})
            self.assertEqual((o["text"], o["token_ids"]), (c.text, c.token_ids))
            self.assertEqual(len(o["token_ids"]), 5)
            self.assertTrue(all(isinstance(t, int) and 0 <= t < 512 for t in o["token_ids"]))
        self.assertEqual(len({o.request_id for o in outs}), 4)
        # Each alone gives the same (order and batching do not change greedy outputs).
        for p, o in zip(prompts, outs):
            alone = self.llm.generate([p], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
                                      use_tqdm=False)
            self.assertEqual(alone[0]["token_ids"], o["token_ids"])

    def test_greedy_equals_the_cli(self):
        prompts = reference_prompts()
        want = cli_generate(FIXTURE, [{"prompt_token_ids": p, "max_tokens": 24, "temperature": 0,
                                       "ignore_eos": True} for p in prompts])
        got = self.llm.generate(prompts, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),
                                use_tqdm=False)
        self.assertEqual([o["token_ids"] for o in got], [w["token_ids"] for w in want])
        self.assertTrue(any(len(set(w["token_ids"])) > 1 for w in want))  # not a degenerate run

    def test_seeded_sampling_equals_the_cli(self):
        prompts = reference_prompts()[:3]
        sp = dict(temperature=0.8, top_k=50, top_p=0.9, seed=7, max_tokens=12, ignore_eos=True)
        want = cli_generate(FIXTURE, [dict(prompt_token_ids=p, **sp) for p in prompts])
        got = self.llm.generate(prompts, SamplingParams(**sp), use_tqdm=False)
        self.assertEqual([o["token_ids"] for o in got], [w["token_ids"] for w in want])

    def test_stop_token_ids_end_a_request(self):
        p = reference_prompts()[2]
        full = self.llm.generate([p], SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),
                                 use_tqdm=False)[0]["token_ids"]
        stop = full[3]
        cut = self.llm.generate([p], SamplingParams(temperature=0, max_tokens=24, ignore_eos=True,
                                                    stop_token_ids=[stop]), use_tqdm=False)[0]["token_ids"]
        self.assertEqual(cut, full[:full.index(stop) + 1])

    def test_one_params_or_a_list(self):
        prompts = reference_prompts()[:3]
        sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        one = self.llm.generate(prompts, sp, use_tqdm=False)
        many = self.llm.generate(prompts, [sp] * 3, use_tqdm=False)
        self.assertEqual(samples(one), samples(many))
        lens = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (1, 4, 9)]
        outs = self.llm.generate(prompts, lens, use_tqdm=False)
        self.assertEqual([len(o["token_ids"]) for o in outs], [1, 4, 9])
        for o, full in zip(outs, one):  # a prefix of the longer greedy run
            n = min(len(o["token_ids"]), 6)
            self.assertEqual(o["token_ids"][:n], full["token_ids"][:n])

    def test_progress_bar_does_not_change_outputs(self):
        sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
        p = reference_prompts()[:2]
        self.assertEqual(samples(self.llm.generate(p, sp)), samples(self.llm.generate(p, sp, use_tqdm=False)))

    def test_empty_prompt_list(self):
        self.assertEqual(self.llm.generate([], SamplingParams()), [])


class TextTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = byte_tokenizer_model()
        cls.llm = LLM(cls.model, **CPU)

    @classmethod
    def tearDownClass(cls):
        del cls.llm
        shutil.rmtree(cls.model)

    def test_text_and_token_id_prompts_agree(self):
        sp = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, skip_special_tokens=False)
        by_text, by_ids = self.llm.generate(["Hello", list(b"Hello")], sp, use_tqdm=False)
        self.assertEqual(samples([by_text]), samples([by_ids]))
        self.assertEqual((by_text.prompt, by_ids.prompt), ("Hello", None))
        self.assertIsInstance(by_text["text"], str)
        self.assertNotEqual(by_text["text"], "")

class TextAtTheEndTest(unittest.TestCase):
    """Without stop strings a request's text is decoded once when it finishes; with them, token by
    token (the output processor). Both give the same text."""

    def check(self, make_model):
        model = make_model()
        try:
            llm = LLM(model, **CPU)
            prompts = [p for p in reference_prompts() if len(p) < 200]
            never = ["\x00never\x00"]  # a stop string that does not occur: the incremental path
            for extra in (dict(ignore_eos=True), dict(stop_token_ids=[106, 310, 80]),
                          dict(stop_token_ids=[106, 310, 80], include_stop_str_in_output=True),
                          dict(ignore_eos=True, skip_special_tokens=False)):
                sp = dict(temperature=0, max_tokens=40, **extra)
                at_end = llm.generate(prompts, SamplingParams(**sp), use_tqdm=False)
                incremental = llm.generate(prompts, SamplingParams(stop=never, **sp), use_tqdm=False)
                self.assertEqual(samples(at_end), samples(incremental), extra)
                self.assertTrue(any(o["text"] for o in at_end))
        finally:
            shutil.rmtree(model)

    def test_qwen3_tokenizer(self):
        self.check(qwen3_tokenizer_model)

    def test_byte_tokenizer_with_ids_past_its_vocabulary(self):
        self.check(byte_tokenizer_model)


class LLMEngineTest(unittest.TestCase):

    def test_add_request_step_loop(self):
        engine = LLMEngine(FIXTURE, **CPU)
        prompts = reference_prompts()[:3]
        sps = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (3, 5, 7)]
        ids = [engine.add_request(p, sp) for p, sp in zip(prompts, sps)]
        self.assertEqual(len(set(ids)), 3)
        self.assertFalse(engine.is_finished())
        done, counts = {}, []
        while not engine.is_finished():
            outputs, num_tokens = engine.step()
            counts.append(num_tokens)
            for seq_id, token_ids in outputs:
                done[seq_id] = token_ids
        self.assertEqual(sorted(done), sorted(ids))
        self.assertEqual(counts[0], sum(len(p) for p in prompts))  # the prefill: every prompt token
        self.assertTrue(all(c < 0 for c in counts[1:]))  # decode steps: minus the sequences
        self.assertEqual(counts[1], -3)
        want = engine.generate(prompts, sps, use_tqdm=False)
        self.assertEqual([done[i] for i in ids], [w["token_ids"] for w in want])

    def test_llm_is_an_llm_engine(self):
        self.assertTrue(issubclass(LLM, LLMEngine))


class StructuredOutputsTest(unittest.TestCase):
    """vLLM's StructuredOutputsParams / GuidedDecodingParams -> the engine's structured outputs, through
    the server's own reader of the request fields."""

    def test_each_kind_reaches_the_engine_params(self):
        schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
        cases = [
            (StructuredOutputsParams(json=schema), "json", '{"type":"object","properties":{"b":{"type":"integer"},'
                                                           '"a":{"type":"string"}}}'),
            (StructuredOutputsParams(json='{"type": "integer"}'), "json", '{"type":"integer"}'),
            (StructuredOutputsParams(regex="[a-z]+"), "regex", "[a-z]+"),
            (StructuredOutputsParams(grammar='root ::= "a"'), "grammar", 'root ::= "a"'),
            (StructuredOutputsParams(json_object=True), "json_object", ""),
        ]
        for params, kind, text in cases:
            so = SamplingParams(max_tokens=4, structured_outputs=params).to_core().structured_outputs
            self.assertEqual((so.kind, so.text), (kind, text))
        sp = SamplingParams(structured_outputs=StructuredOutputsParams(choice=["yes", "no"]))
        so = sp.to_core().structured_outputs
        self.assertEqual((so.kind, so.choices), ("choice", ["yes", "no"]))
        sp = SamplingParams(guided_decoding=GuidedDecodingParams(regex="x+", backend="xgrammar"))
        so = sp.to_core().structured_outputs
        self.assertEqual((so.kind, so.text), ("regex", "x+"))
        self.assertEqual(SamplingParams().to_core().structured_outputs.kind, "none")

    def test_a_pydantic_model_gives_its_schema(self):
        class Model:  # what StructuredOutputsParams reads of a pydantic model class
            @staticmethod
            def model_json_schema():
                return {"type": "object", "properties": {"x": {"type": "number"}}}
        so = SamplingParams(structured_outputs=StructuredOutputsParams(json=Model)).to_core().structured_outputs
        self.assertEqual(so.text, '{"type":"object","properties":{"x":{"type":"number"}}}')

    def test_whitespace_follows_the_engine_config_unless_the_params_say(self):
        sp = SamplingParams(structured_outputs=StructuredOutputsParams(json={"type": "object"}))
        self.assertFalse(sp.to_core().structured_outputs.any_whitespace)  # our default: compact
        self.assertTrue(sp.to_core('{"disable_any_whitespace": false}').structured_outputs.any_whitespace)
        compact = SamplingParams(structured_outputs=StructuredOutputsParams(json={}, disable_any_whitespace=True))
        self.assertFalse(compact.to_core('{"disable_any_whitespace": false}').structured_outputs.any_whitespace)
        loose = SamplingParams(structured_outputs=StructuredOutputsParams(json={}, whitespace_pattern="[ \n\t]*"))
        self.assertTrue(loose.to_core().structured_outputs.any_whitespace)

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "only use one kind.*json, regex"):
            StructuredOutputsParams(json={}, regex="a")
        with self.assertRaisesRegex(ValueError, "none are specified"):
            StructuredOutputsParams()
        with self.assertRaisesRegex(ValueError, "not both"):
            SamplingParams(structured_outputs=StructuredOutputsParams(regex="a"),
                           guided_decoding=GuidedDecodingParams(regex="b"))
        with self.assertRaisesRegex(TypeError, "regex must be a str or None"):
            StructuredOutputsParams(regex=5)
        with self.assertRaisesRegex(TypeError, "structured_outputs must be"):
            SamplingParams(structured_outputs={"regex": "a"})
        with self.assertRaisesRegex(ValueError, "structured_outputs.choice' must list at least one string"):
            SamplingParams(structured_outputs=StructuredOutputsParams(choice=[]))
        with self.assertRaisesRegex(ValueError, "structural tags"):
            SamplingParams(structured_outputs=StructuredOutputsParams(structural_tag="{}"))
        with self.assertRaisesRegex(ValueError, "backend 'lmfe' is not available"):
            SamplingParams(guided_decoding=GuidedDecodingParams(regex="a", backend="lmfe"))
        with self.assertRaisesRegex(ValueError, "whitespace_pattern"):
            SamplingParams(structured_outputs=StructuredOutputsParams(json={}, whitespace_pattern=r"\s*"))
        with self.assertRaisesRegex(ValueError, "structured_outputs.json"):
            SamplingParams(structured_outputs=StructuredOutputsParams(json="{not json"))

    def test_llm_takes_the_engine_settings(self):
        llm = LLM(FIXTURE, **CPU, structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": False},
                  guided_decoding_backend="xgrammar")
        self.assertIn('"disable_any_whitespace":false', llm._structured_config)
        with self.assertRaisesRegex(ValueError, "unknown key 'colour'"):
            LLM(FIXTURE, **CPU, structured_outputs_config={"colour": 1})
        with self.assertRaisesRegex(ValueError, "backend 'lmfe' is not available"):
            LLM(FIXTURE, **CPU, guided_decoding_backend="lmfe")


class ExtensionTest(unittest.TestCase):

    def test_the_module_exports_its_init_function_alone(self):
        # The static libraries in _core (ours, libstdc++'s statically linked parts on some
        # toolchains) must not bind symbols of libraries loaded after it (python/CMakeLists.txt).
        core = nanovllm._core.__file__
        out = subprocess.run(["nm", "-D", "--defined-only", core], check=True, capture_output=True,
                             text=True).stdout
        # nm's type letter: upper case for a global symbol, u for a GNU_UNIQUE one; lower case local.
        rows = [line.split() for line in out.splitlines() if line.strip()]
        names = sorted(r[-1] for r in rows if r[-2].isupper() or r[-2] == "u")
        self.assertEqual(names, ["PyInit__core"])


if __name__ == "__main__":
    unittest.main()
