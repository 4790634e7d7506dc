"""vLLM's pooling API on the CPU backend with the tiny fixture run as a pooling model: embed() /
encode() / classify() / score() and their output classes, PoolingParams (normalize, dimensions
refused without Matryoshka), truncate_prompt_tokens, and the refusals on the wrong kind of model."""
import math
import shutil
import unittest

from helpers import CPU, qwen3_tokenizer_model
from nanovllm import (LLM, EmbeddingOutput, PoolingOutput, PoolingParams, PoolingRequestOutput, SamplingParams,
                      ScoringOutput)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


class PoolingTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = qwen3_tokenizer_model()
        cls.llm = LLM(cls.model, runner="pooling", **CPU)

    @classmethod
    def tearDownClass(cls):
        del cls.llm
        shutil.rmtree(cls.model)

    def test_embed_outputs(self):
        outs = self.llm.embed([[5, 6, 7], "a b c"], use_tqdm=False)
        self.assertEqual(len(outs), 2)
        self.assertIsInstance(outs[0], PoolingRequestOutput)
        self.assertIsInstance(outs[0].outputs, EmbeddingOutput)
        self.assertEqual(outs[0].prompt_token_ids, [5, 6, 7])
        self.assertEqual(len(outs[0].outputs.embedding), 64)
        self.assertAlmostEqual(norm(outs[0].outputs.embedding), 1.0, places=5)
        raw = self.llm.embed([[5, 6, 7]], PoolingParams(normalize=False), use_tqdm=False)[0].outputs.embedding
        n = norm(raw)
        for a, b in zip(raw, outs[0].outputs.embedding):
            self.assertAlmostEqual(a / n, b, places=5)

    def test_encode_and_truncation(self):
        o = self.llm.encode([[5, 6, 7, 8, 9]], use_tqdm=False, truncate_prompt_tokens=2)[0]
        self.assertIsInstance(o.outputs, PoolingOutput)
        self.assertEqual(o.prompt_token_ids, [8, 9])
        same = self.llm.embed([[8, 9]], use_tqdm=False)[0].outputs.embedding
        for a, b in zip(o.outputs.data, same):
            self.assertAlmostEqual(a, b, places=6)

    def test_score_by_cosine(self):
        scores = self.llm.score([5, 6, 7], [[5, 6, 7], [9, 10, 11, 12]])
        self.assertIsInstance(scores[0].outputs, ScoringOutput)
        self.assertAlmostEqual(scores[0].outputs.score, 1.0, places=5)
        self.assertLess(scores[1].outputs.score, 0.9999)
        with self.assertRaisesRegex(ValueError, "1:1, 1:N or N:N"):
            self.llm.score([[5], [6]], [[5], [6], [7]])

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "matryoshka"):
            self.llm.embed([[5, 6]], PoolingParams(dimensions=8), use_tqdm=False)
        with self.assertRaisesRegex(ValueError, "pooling_task must be one of"):
            self.llm.classify([[5, 6]], use_tqdm=False)
        with self.assertRaisesRegex(ValueError, "pooling model"):
            self.llm.generate([[5, 6]], SamplingParams(max_tokens=2), use_tqdm=False)


    def test_pooler_config_as_a_dict(self):
        mean = LLM(self.model, runner="pooling", pooler_config={"pooling_type": "MEAN", "normalize": False}, **CPU)
        ids = [[5, 6, 7], [5], [5, 6]]
        firsts = [self.llm.embed([p], PoolingParams(normalize=False), use_tqdm=False)[0].outputs.embedding
                  for p in ids]  # LAST of each prefix: the rows MEAN averages
        got = mean.embed([ids[0]], use_tqdm=False)[0].outputs.embedding
        for k in range(len(got)):
            self.assertAlmostEqual(got[k], sum(f[k] for f in firsts) / 3, places=5)
        del mean


class GenerativeModelTest(unittest.TestCase):

    def test_embed_refused(self):
        model = qwen3_tokenizer_model()
        try:
            llm = LLM(model, **CPU)
            with self.assertRaisesRegex(ValueError, "only supported for pooling models"):
                llm.embed(["a"], use_tqdm=False)
            del llm
        finally:
            shutil.rmtree(model)


if __name__ == "__main__":
    unittest.main()
