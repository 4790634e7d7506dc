"""nano-vllm's LLMEngine: add_request / step / is_finished, and generate() over them (run in
C++ with the GIL released; Ctrl-C raises KeyboardInterrupt and aborts the call's requests)."""
import os

from nanovllm import _core
from nanovllm._checks import check_type
from nanovllm.config import EngineArgs, engine_messages
from nanovllm.sampling_params import SamplingParams


def _prompt(p, what="prompt"):
    if isinstance(p, str):
        return p
    check_type(what, p, (str, [int]))
    return list(p)


def _params(sp, structured_config, what="sampling_params"):
    if not isinstance(sp, SamplingParams):
        raise TypeError(f"{what} must be a nanovllm.SamplingParams (got {type(sp).__name__})")
    return sp.to_core(structured_config)


class LLMEngine:

    def __init__(self, model, **kwargs):
        args = EngineArgs(model, kwargs)
        # tensor_parallel_size > 1: the other ranks are the package's nanovllm executable.
        worker = os.path.join(os.path.dirname(__file__), "bin", "nanovllm")
        # Structured outputs' engine defaults (JSON whitespace), applied to each request's params.
        self._structured_config = args.config.get("structured_outputs_config")
        with engine_messages():
            self._llm = _core.LLM(args.config, args.tokenizer_dir, args.skip_tokenizer_init, worker)

    def exit(self):
        """Frees the engine (nano-vllm's exit(); also done when the object goes away)."""
        self._llm = None

    def add_request(self, prompt: str | list[int], sampling_params: SamplingParams) -> int:
        """Queues one request; returns its id (the seq_id that step() reports)."""
        with engine_messages():
            return self._llm.add_request(_prompt(prompt), _params(sampling_params, self._structured_config))

    def step(self):
        """One engine step: ([(seq_id, completion_token_ids) of the requests that finished], n)
        with n the tokens of a prefill step or minus the sequences of a decode step."""
        with engine_messages():
            outputs, num_tokens = self._llm.step()
        return [(o["request_id"], o["token_ids"]) for o in outputs], num_tokens

    def is_finished(self) -> bool:
        return not self._llm.has_unfinished()

    def generate(self, prompts, sampling_params, use_tqdm: bool = True) -> list[dict]:
        """[{"text": str, "token_ids": list[int]}] in the order of `prompts` (strings or lists of
        token ids). `sampling_params`: one for all, or a list with one per prompt. use_tqdm: a
        progress bar with the prefill and decode throughput on stderr (when it is a terminal)."""
        if isinstance(prompts, str):
            prompts = [prompts]
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"prompts must be a list of prompts (str or list of int), got {type(prompts).__name__}")
        ps = [_prompt(p, f"prompts[{i}]") for i, p in enumerate(prompts)]
        if isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != len(ps):
                raise ValueError(f"{len(sampling_params)} sampling params for {len(ps)} prompts")
            sps = [_params(sp, self._structured_config, f"sampling_params[{i}]")
                   for i, sp in enumerate(sampling_params)]
        else:
            sps = [_params(sampling_params, self._structured_config)]
        if not ps:
            return []
        check_type("use_tqdm", use_tqdm, bool)
        with engine_messages():
            return self._llm.generate(ps, sps, use_tqdm)
