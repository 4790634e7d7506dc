"""LLM(...)'s keywords are the engine settings table's (_core.settings()): each keyword sets its
setting, its type is checked, and a preset gets the tokenizer the CLI gives it."""
import json
import os
import unittest

from nanovllm import _core
from nanovllm.config import EngineArgs


def other_value(s):
    """A value of setting s other than its default, as Python passes it."""
    d = s["default"]
    if s["type"] in ("bool", "optional_bool"):
        return d != "true"
    if s["type"] == "int":
        return int(d) + 1
    if s["type"] == "float":
        return 0.5
    if s["type"] == "choice":
        return next((c for c in reversed(s["choices"]) if c != d), d)
    if s["name"] == "structured_outputs_config":
        return {"backend": "xgrammar", "disable_any_whitespace": False}  # vLLM's dict (the setting's JSON)
    if s["name"] == "speculative_config":
        return {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    if s["name"] == "pooler_config":
        return {"pooling_type": "MEAN", "normalize": False}
    if s["name"] == "hf_overrides":
        return {"classifier_from_token": ["no", "yes"], "method": "from_2_way_softmax"}
    return "pdl=off" if s["name"] == "kernel_options" else "x"


class KeywordsTest(unittest.TestCase):

    def test_every_keyword_sets_its_setting(self):
        for s in _core.settings():
            for k in s["keywords"]:
                v = other_value(s)
                # valid only with a partial-prefill limit at least as large
                extra = {"max_num_partial_prefills": v} if k == "max_long_partial_prefills" else {}
                cfg = EngineArgs("qwen3-0.6b", {k: v, **extra}).config
                got = cfg.get(s["name"])
                if s["name"] == "kernel_options":
                    self.assertIn("pdl=off", got, k)
                elif s["name"] == "structured_outputs_config":
                    self.assertEqual({a: b for a, b in json.loads(got).items() if a in v}, v, k)
                elif s["name"] in ("speculative_config", "pooler_config", "hf_overrides"):
                    self.assertEqual(json.loads(got), v, k)
                else:
                    self.assertEqual(got, v, k)

    def test_types_come_from_the_table(self):
        for s in _core.settings():
            for k in s["keywords"]:
                wrong = 1.5 if s["type"] in ("bool", "optional_bool", "int", "str", "choice") else "x"
                with self.assertRaisesRegex(TypeError, k, msg=k):
                    EngineArgs("qwen3-0.6b", {k: wrong})

    def test_scheduling_policy_takes_fcfs_and_priority(self):
        EngineArgs("qwen3-0.6b", {"scheduling_policy": "priority"})
        with self.assertRaisesRegex(ValueError, "scheduling_policy must be fcfs or priority"):
            EngineArgs("qwen3-0.6b", {"scheduling_policy": "lifo"})


class PresetTokenizerTest(unittest.TestCase):

    def test_presets_get_the_clis_tokenizer(self):
        if os.environ.get("NANOVLLM_TOKENIZER_DIR"):
            self.skipTest("NANOVLLM_TOKENIZER_DIR overrides the presets' tokenizers")
        for preset, name in (("qwen3-0.6b", "qwen3"), ("qwen2.5-0.5b", "qwen3"), ("llama-3.2-1b", "llama3"),
                             ("mistral-7b", "")):
            self.assertEqual(_core.preset_tokenizer_name(preset), name, preset)
            d = EngineArgs(preset, {"load_format": "dummy"}).tokenizer_dir
            if name:
                self.assertEqual(os.path.basename(d), name, preset)
            else:
                self.assertEqual(d, "", preset)


if __name__ == "__main__":
    unittest.main()
