"""vLLM's offline API on the CPU backend with the tiny fixture: RequestOutput / CompletionOutput
shapes, n and logprobs, prompt forms, default params from generation_config.json, chat and the
tokenizer (against tokenizer.json and the CLI's template rendering), vLLM's SamplingParams fields
(bad_words, allowed_token_ids, detokenize, refusals), LLM keywords, and AsyncLLM streaming."""
import asyncio
import json
import math
import os
import shutil
import subprocess
import unittest

from helpers import BINARY, CPU, byte_tokenizer_model, qwen3_tokenizer_model, reference_prompts
from nanovllm import AsyncLLM, LLM, Logprob, RequestOutputKind, SamplingParams

GREEDY = dict(temperature=0, ignore_eos=True)


class OutputsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = qwen3_tokenizer_model()
        cls.llm = LLM(cls.model, **CPU)
        cls.tok = cls.llm.get_tokenizer()

    @classmethod
    def tearDownClass(cls):
        del cls.llm
        shutil.rmtree(cls.model)

    def test_logprobs_are_vllms_dicts(self):
        p = reference_prompts()[1]
        o = self.llm.generate([p], SamplingParams(max_tokens=6, logprobs=3, **GREEDY), use_tqdm=False)[0]
        c = o.outputs[0]
        self.assertEqual(len(c.logprobs), len(c.token_ids))
        total = 0.0
        for step, t in zip(c.logprobs, c.token_ids):
            self.assertEqual(next(iter(step)), t)  # the sampled token first
            self.assertIsInstance(step[t], Logprob)
            self.assertEqual(step[t].rank, 1)  # greedy: the most likely
            ranks = sorted(lp.rank for lp in step.values())
            self.assertEqual(ranks, [1, 2, 3])  # the sampled token is also the top-1: 3 entries
            by_rank = sorted(step.values(), key=lambda lp: lp.rank)
            self.assertTrue(all(a.logprob >= b.logprob for a, b in zip(by_rank, by_rank[1:])))
            self.assertTrue(all(lp.logprob <= 0 for lp in step.values()))
            for tid, lp in step.items():
                self.assertEqual(lp.decoded_token, self.tok.decode([tid]))
            total += step[t].logprob
        self.assertAlmostEqual(c.cumulative_logprob, total, places=4)

    def test_sampled_logprobs_match_the_prompt_logprobs_of_the_same_text(self):
        # The logprob of each generated token given the text before it equals the prompt logprob of
        # that token when the whole text is fed back as a prompt (same model, same positions).
        p = reference_prompts()[1]
        c = self.llm.generate([p], SamplingParams(max_tokens=5, logprobs=0, **GREEDY), use_tqdm=False)[0].outputs[0]
        again = self.llm.generate([p + c.token_ids], SamplingParams(max_tokens=1, prompt_logprobs=2, **GREEDY),
                                  use_tqdm=False)[0]
        self.assertEqual(len(again.prompt_logprobs), len(p) + 5)
        self.assertIsNone(again.prompt_logprobs[0])
        for k, t in enumerate(c.token_ids):
            entry = again.prompt_logprobs[len(p) + k]
            self.assertEqual(next(iter(entry)), t)
            self.assertAlmostEqual(entry[t].logprob, c.logprobs[k][t].logprob, places=3)
            self.assertLessEqual(len(entry), 3)

    def test_n_samples(self):
        p = reference_prompts()[2]
        o = self.llm.generate([p], SamplingParams(n=4, temperature=1.0, seed=5, max_tokens=8, ignore_eos=True),
                              use_tqdm=False)[0]
        self.assertEqual([c.index for c in o.outputs], [0, 1, 2, 3])
        self.assertTrue(all(len(c.token_ids) == 8 for c in o.outputs))
        self.assertGreater(len({tuple(c.token_ids) for c in o.outputs}), 1)
        # Sample j is the request with seed + j (vLLM's parallel sampling).
        for j in (0, 3):
            alone = self.llm.generate([p], SamplingParams(temperature=1.0, seed=5 + j, max_tokens=8, ignore_eos=True),
                                      use_tqdm=False)[0].outputs[0]
            self.assertEqual(alone.token_ids, o.outputs[j].token_ids)
        mixed = self.llm.generate([p, p], [SamplingParams(n=2, max_tokens=3, **GREEDY),
                                           SamplingParams(n=1, max_tokens=4, **GREEDY)], use_tqdm=False)
        self.assertEqual([len(o.outputs) for o in mixed], [2, 1])
        self.assertEqual(mixed[0].outputs[0].token_ids, mixed[0].outputs[1].token_ids)  # greedy
        self.assertEqual(mixed[1].outputs[0].token_ids[:3], mixed[0].outputs[0].token_ids)

    def test_stop_and_finish_reasons(self):
        p = reference_prompts()[2]
        full = self.llm.generate([p], SamplingParams(max_tokens=12, **GREEDY), use_tqdm=False)[0].outputs[0]
        stop = full.token_ids[4]
        c = self.llm.generate([p], SamplingParams(max_tokens=12, stop_token_ids=[stop], **GREEDY),
                              use_tqdm=False)[0].outputs[0]
        self.assertEqual((c.finish_reason, c.stop_reason), ("stop", stop))  # vLLM: the stop token id
        self.assertEqual(c.token_ids[-1], stop)
        self.assertEqual((full.finish_reason, full.stop_reason), ("length", None))
        word = full.text[len(full.text) // 2:][:2]
        if word:
            s = self.llm.generate([p], SamplingParams(max_tokens=12, stop=["\x00no", word], **GREEDY),
                                  use_tqdm=False)[0].outputs[0]
            self.assertEqual((s.finish_reason, s.stop_reason), ("stop", word))  # the stop string
            self.assertNotIn(word, s.text)

    def test_detokenize_false(self):
        p = reference_prompts()[2]
        on = self.llm.generate([p], SamplingParams(max_tokens=6, **GREEDY), use_tqdm=False)[0].outputs[0]
        off = self.llm.generate([p], SamplingParams(max_tokens=6, detokenize=False, **GREEDY),
                                use_tqdm=False)[0].outputs[0]
        self.assertEqual(off.token_ids, on.token_ids)
        self.assertEqual(off.text, "")
        self.assertNotEqual(on.text, "")
        with self.assertRaisesRegex(ValueError, "detokenize"):
            SamplingParams(detokenize=False, stop=["x"])

    def test_allowed_token_ids(self):
        allowed = [11, 200, 301, 450]
        outs = self.llm.generate(reference_prompts()[:3], SamplingParams(temperature=1.0, seed=2, max_tokens=10,
                                                                          ignore_eos=True, allowed_token_ids=allowed),
                                 use_tqdm=False)
        seen = {t for o in outs for t in o.outputs[0].token_ids}
        self.assertTrue(seen <= set(allowed), seen)
        self.assertGreater(len(seen), 1)
        with self.assertRaisesRegex(ValueError, "out-of-vocab"):
            self.llm.generate([[1]], SamplingParams(allowed_token_ids=[100000]))
        with self.assertRaisesRegex(ValueError, "empty"):
            SamplingParams(allowed_token_ids=[])

    def test_bad_words(self):
        # "a" is token 64 alone and 264 after a space (" a"): vLLM bans both spellings.
        self.assertEqual((self.tok.encode("a", False), self.tok.encode(" a", False)), ([64], [264]))
        prompts = reference_prompts()[:3]

        def run(**kw):
            sp = SamplingParams(temperature=1.0, seed=3, max_tokens=30, ignore_eos=True,
                                allowed_token_ids=[64, 264, 6, 210], **kw)
            return [t for o in self.llm.generate(prompts, sp, use_tqdm=False) for t in o.outputs[0].token_ids]
        free, banned = run(), run(bad_words=["a"])
        self.assertTrue({64, 264} & set(free))
        self.assertFalse({64, 264} & set(banned))
        self.assertEqual(len(banned), 90)
        with self.assertRaisesRegex(ValueError, "bad_words"):
            SamplingParams(bad_words=[""])

    def test_max_tokens_none_runs_to_the_context(self):
        p = reference_prompts()[0]
        c = self.llm.generate([p], SamplingParams(max_tokens=None, **GREEDY), use_tqdm=False)[0].outputs[0]
        self.assertEqual(len(p) + len(c.token_ids), self.llm._max_model_len)
        self.assertEqual(c.finish_reason, "length")

    def test_refused_fields_are_named(self):
        for kw, name in ((dict(best_of=3), "best_of"), (dict(truncate_prompt_tokens=5), "truncate_prompt_tokens"),
                         (dict(logits_processors=[print]), "logits_processors"),
                         (dict(spaces_between_special_tokens=False), "spaces_between_special_tokens")):
            with self.assertRaisesRegex(ValueError, name):
                SamplingParams(**kw)
        self.assertEqual(SamplingParams(n=3, best_of=3).n, 3)
        with self.assertRaisesRegex(ValueError, "greater than max allowed: 20"):
            self.llm.generate([[1]], SamplingParams(logprobs=-1))  # the whole vocabulary > max_logprobs
        with self.assertRaisesRegex(ValueError, "LoRA"):
            self.llm.generate([[1]], SamplingParams(), lora_request=object())


class ChatAndTokenizerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = qwen3_tokenizer_model()
        cls.llm = LLM(cls.model, **CPU)
        cls.tok = cls.llm.get_tokenizer()
        with open(os.path.join(cls.model, "tokenizer.json")) as f:
            tj = json.load(f)
        cls.vocab = {i: s for s, i in tj["model"]["vocab"].items()}
        cls.vocab.update({t["id"]: t["content"] for t in tj["added_tokens"]})
        cls.base = len(tj["model"]["vocab"])

    @classmethod
    def tearDownClass(cls):
        del cls.llm
        shutil.rmtree(cls.model)

    def cli_render(self, line):
        r = subprocess.run([BINARY, "tokenize", "--model", self.model, "--input", "-"], input=json.dumps(line) + "\n",
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout)["text"]

    def test_priority(self):
        p = reference_prompts()[1]
        sp = SamplingParams(max_tokens=3, **GREEDY)
        with self.assertRaisesRegex(ValueError, "Got priority 2 but Priority scheduling is not enabled"):
            self.llm.generate([p], sp, priority=[2], use_tqdm=False)
        with self.assertRaisesRegex(ValueError, "one int per prompt"):
            self.llm.generate([p, p], sp, priority=[2], use_tqdm=False)
        llm = LLM(self.model, scheduling_policy="priority", **CPU)
        outs = llm.generate([p, p], sp, priority=[3, -1], use_tqdm=False)
        self.assertEqual(outs[0].outputs[0].token_ids, outs[1].outputs[0].token_ids)
        self.assertEqual(outs[0].outputs[0].token_ids,
                         self.llm.generate([p], sp, use_tqdm=False)[0].outputs[0].token_ids)

    def test_tokenizer_against_tokenizer_json(self):
        ids = [0, 9707, 11, 1879, 151643, 151645, 220, 50000]
        self.assertEqual(self.tok.convert_ids_to_tokens(ids), [self.vocab[i] for i in ids])
        self.assertEqual(self.tok.convert_ids_to_tokens(9707), self.vocab[9707])
        self.assertEqual(self.tok.convert_tokens_to_ids([self.vocab[i] for i in ids]), ids)
        self.assertEqual(self.tok.vocab_size, self.base)
        self.assertEqual(len(self.tok), max(self.vocab) + 1)
        self.assertEqual(self.tok.eos_token_id, self.tok.convert_tokens_to_ids(self.tok.eos_token))
        text = "Hello, world! ünïcødé 你好"
        ids = self.tok.encode(text)
        self.assertEqual(self.tok.decode(ids), text)
        self.assertEqual(self.tok(text)["input_ids"], ids)
        self.assertEqual(self.tok.decode([151645]), "<|im_end|>")  # Hugging Face keeps specials by default
        self.assertEqual(self.tok.decode([151645], skip_special_tokens=True), "")

    def test_chat_template_renders_as_the_cli(self):
        conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
        for kw in ({}, {"tools": tools}, {"enable_thinking": False}):
            want = self.cli_render({"messages": conv, "add_generation_prompt": True, **kw})
            got = self.tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False, **kw)
            self.assertEqual(got, want, kw)
            self.assertEqual(self.tok.apply_chat_template(conv, add_generation_prompt=True, **kw),
                             self.tok.encode(want, add_special_tokens=False))
        text = self.tok.apply_chat_template(conv + [{"role": "assistant", "content": "The answer is"}],
                                            continue_final_message=True, tokenize=False)
        self.assertTrue(text.endswith("The answer is"), text)
        self.assertTrue(text.startswith(self.tok.apply_chat_template(conv, tokenize=False)))


# A chat template over the byte-level tokenizer's ids (the tiny model's vocabulary): messages,
# tools, a template variable and the generation prompt all show in the text.
BYTE_TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                 "{% if tools %}[{{ tools | length }} tools]{% endif %}"
                 "{% if enable_thinking is defined and not enable_thinking %}/nothink{% endif %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


class ChatTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = byte_tokenizer_model()
        with open(os.path.join(cls.model, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": BYTE_TEMPLATE}, f)
        cls.llm = LLM(cls.model, **CPU)

    @classmethod
    def tearDownClass(cls):
        del cls.llm
        shutil.rmtree(cls.model)

    def test_prompt_forms(self):
        ids = list(b"Hello there")
        sp = SamplingParams(max_tokens=4, **GREEDY)
        forms = ["Hello there", ids, {"prompt": "Hello there"}, {"prompt_token_ids": ids}]
        outs = self.llm.generate(forms, sp, use_tqdm=False)
        self.assertEqual(len({tuple(o.outputs[0].token_ids) for o in outs}), 1)
        self.assertEqual([o.prompt for o in outs], ["Hello there", None, "Hello there", None])
        self.assertTrue(all(o.prompt_token_ids == ids for o in outs))
        for single in forms:  # one prompt, not in a list
            self.assertEqual(self.llm.generate(single, sp, use_tqdm=False)[0].outputs[0].token_ids,
                             outs[0].outputs[0].token_ids)
        with self.assertRaisesRegex(ValueError, "multimodal"):
            self.llm.generate({"prompt": "x", "multi_modal_data": {"image": 1}}, sp)
        with self.assertRaisesRegex(ValueError, "'prompt' or 'prompt_token_ids'"):
            self.llm.generate({}, sp)

    def test_chat(self):
        conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        tools = [{"type": "function", "function": {"name": "f"}}]
        sp = SamplingParams(max_tokens=4, **GREEDY)
        cases = (({}, "<system>Be brief.<user>Hi<assistant>"),
                 ({"tools": tools}, "<system>Be brief.<user>Hi[1 tools]<assistant>"),
                 ({"chat_template_kwargs": {"enable_thinking": False}}, "<system>Be brief.<user>Hi/nothink<assistant>"),
                 ({"add_generation_prompt": False}, "<system>Be brief.<user>Hi"))
        for kw, want in cases:
            o = self.llm.chat(conv, sp, use_tqdm=False, **kw)[0]
            self.assertEqual(o.prompt, want, kw)
            self.assertEqual(o.prompt_token_ids, list(want.encode()))
            self.assertEqual(o.outputs[0].token_ids,
                             self.llm.generate([o.prompt_token_ids], sp, use_tqdm=False)[0].outputs[0].token_ids)
        many = self.llm.chat([conv, conv[1:]], SamplingParams(max_tokens=2, **GREEDY), use_tqdm=False)
        self.assertEqual([o.prompt for o in many], ["<system>Be brief.<user>Hi<assistant>", "<user>Hi<assistant>"])

    def test_chat_options(self):
        conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}]
        sp = SamplingParams(max_tokens=1)
        text = self.llm.chat(conv, sp, add_generation_prompt=False, continue_final_message=True,
                             use_tqdm=False)[0].prompt
        self.assertEqual(text, "<user>Hi<assistant>The answer is")
        with self.assertRaisesRegex(ValueError, "cannot both"):
            self.llm.chat(conv, continue_final_message=True)  # add_generation_prompt defaults to True
        own = self.llm.chat([{"role": "user", "content": "Hi"}], sp, use_tqdm=False,
                            chat_template="{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}")[0]
        self.assertEqual(own.prompt, "[user]Hi")
        parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
        self.assertEqual(self.llm.chat(parts, sp, use_tqdm=False)[0].prompt, "<user>a\nb<assistant>")
        with self.assertRaisesRegex(ValueError, "role"):
            self.llm.chat([{"content": "x"}], sp)


class EngineKeywordsTest(unittest.TestCase):

    def test_generation_config_and_keywords(self):
        model = qwen3_tokenizer_model()
        try:
            with open(os.path.join(model, "generation_config.json"), "w") as f:
                json.dump({"temperature": 0.25, "top_k": 7, "max_new_tokens": 3}, f)
            llm = LLM(model, dtype="auto", trust_remote_code=True, **CPU)
            d = llm.get_default_sampling_params()
            self.assertEqual((d.temperature, d.top_k, d.max_tokens), (0.25, 7, 3))
            self.assertEqual(len(llm.generate([[5, 6]], use_tqdm=False)[0].outputs[0].token_ids), 3)
            del llm
            llm = LLM(model, generation_config="vllm", override_generation_config={"temperature": 0.5},
                      dtype="float32", **CPU)
            d = llm.get_default_sampling_params()
            self.assertEqual((d.temperature, d.top_k, d.max_tokens), (0.5, 0, 16))
            llm.exit()
            with self.assertRaisesRegex(RuntimeError, "shut down"):
                llm.generate([[1]])
            with self.assertRaisesRegex(RuntimeError, "shut down"):
                llm.get_tokenizer()
            with self.assertRaisesRegex(ValueError, "computes in float32"):
                LLM(model, dtype="bfloat16", **CPU)
            with self.assertRaisesRegex(ValueError, "not a dtype"):
                LLM(model, dtype="int3", **CPU)
        finally:
            shutil.rmtree(model)


class AsyncLLMTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = qwen3_tokenizer_model()
        cls.engine = AsyncLLM(cls.model, **CPU)
        cls.prompts = [p for p in reference_prompts() if len(p) < 100][:3]
        llm = LLM(cls.model, **CPU)
        cls.want = [o.outputs[0] for o in llm.generate(cls.prompts, SamplingParams(max_tokens=12, **GREEDY),
                                                       use_tqdm=False)]
        del llm

    @classmethod
    def tearDownClass(cls):
        cls.engine.shutdown()
        shutil.rmtree(cls.model)

    def collect(self, prompt, rid, **kw):
        async def run():
            return [o async for o in self.engine.generate(prompt, SamplingParams(max_tokens=12, **GREEDY, **kw), rid)]
        return run()

    def test_streams_equal_generate(self):
        async def main():
            ticks = 0

            async def ticker():  # the event loop keeps running while the engine steps
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.001)
                    ticks += 1
            t = asyncio.create_task(ticker())
            runs = await asyncio.gather(*(self.collect(p, f"r{i}") for i, p in enumerate(self.prompts)))
            t.cancel()
            return runs, ticks
        runs, ticks = asyncio.run(main())
        self.assertGreater(ticks, 0)
        for outs, want in zip(runs, self.want):
            self.assertTrue(outs[-1].finished)
            self.assertTrue(all(not o.finished for o in outs[:-1]))
            self.assertGreater(len(outs), 1)  # streamed, not one output
            final = outs[-1].outputs[0]
            self.assertEqual((final.token_ids, final.text, final.finish_reason),
                             (want.token_ids, want.text, want.finish_reason))
            lens = [len(o.outputs[0].token_ids) for o in outs]
            self.assertEqual(lens, sorted(lens))  # cumulative

    def test_output_kinds(self):
        async def main():
            delta = await self.collect(self.prompts[0], "d", output_kind=RequestOutputKind.DELTA)
            final = await self.collect(self.prompts[0], "f", output_kind=RequestOutputKind.FINAL_ONLY)
            return delta, final
        delta, final = asyncio.run(main())
        want = self.want[0]
        self.assertEqual(sum((o.outputs[0].token_ids for o in delta), []), want.token_ids)
        self.assertEqual("".join(o.outputs[0].text for o in delta), want.text)
        self.assertEqual(len(final), 1)
        self.assertEqual(final[0].outputs[0].token_ids, want.token_ids)

    def test_abort_and_errors(self):
        async def main():
            outs = []
            async for o in self.engine.generate(self.prompts[0], SamplingParams(max_tokens=500, **GREEDY), "a"):
                outs.append(o)
                if len(outs) == 2:
                    await self.engine.abort("a")
            with self.assertRaisesRegex(ValueError, "vocabulary|vocab"):
                async for _ in self.engine.generate([10**6], SamplingParams(), "bad"):
                    pass
            # Closing a stream early aborts its request: the engine goes idle.
            gen = self.engine.generate(self.prompts[1], SamplingParams(max_tokens=500, **GREEDY), "c")
            await gen.__anext__()
            await gen.aclose()
            return outs
        outs = asyncio.run(main())
        self.assertEqual(outs[-1].outputs[0].finish_reason, "abort")
        self.assertTrue(outs[-1].finished)
        self.assertLess(len(outs[-1].outputs[0].token_ids), 500)


if __name__ == "__main__":
    unittest.main()
