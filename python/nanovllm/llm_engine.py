"""nano-vllm's LLMEngine (add_request / step / is_finished) and the generate() that vLLM's LLM has,
over the C++ engine (run with the GIL released; Ctrl-C raises KeyboardInterrupt and aborts the
call's requests). generate() returns vLLM's RequestOutputs, which nano-vllm's scripts can still
read as dicts (o["text"], o["token_ids"])."""
import json
import os

from nanovllm import _core
from nanovllm._checks import check_type
from nanovllm.config import EngineArgs, engine_messages, generation_defaults
from nanovllm.outputs import CompletionOutput, RequestOutput, cumulative_logprob, logprob_dicts
from nanovllm.sampling_params import SamplingParams


def _prompt(p, what="prompt"):
    """One prompt -> (engine prompt: text or token ids, its text or None)."""
    if isinstance(p, str):
        return p, p
    if isinstance(p, dict):
        extra = sorted(set(p) - {"prompt", "prompt_token_ids", "multi_modal_data", "mm_processor_kwargs"})
        if extra:
            raise ValueError(f"{what}: unknown keys {extra} (a prompt dict has 'prompt' or 'prompt_token_ids')")
        if p.get("multi_modal_data") or p.get("mm_processor_kwargs"):
            raise ValueError(f"{what}: multimodal inputs are not supported")
        if "prompt_token_ids" in p:
            check_type(f"{what}['prompt_token_ids']", p["prompt_token_ids"], [int])
            return list(p["prompt_token_ids"]), p.get("prompt")
        if "prompt" in p:
            check_type(f"{what}['prompt']", p["prompt"], str)
            return p["prompt"], p["prompt"]
        raise ValueError(f"{what}: a prompt dict needs 'prompt' or 'prompt_token_ids'")
    check_type(what, p, (str, [int]))
    return list(p), None


def _prompt_list(prompts):
    """vLLM's prompt arguments: one prompt (text, token ids, dict) or a list of them."""
    if isinstance(prompts, (str, dict)) or (isinstance(prompts, (list, tuple)) and prompts
                                            and all(isinstance(t, int) and not isinstance(t, bool)
                                                    for t in prompts)):
        return [prompts]
    if not isinstance(prompts, (list, tuple)):
        raise TypeError("prompts must be a prompt (str, list of token ids, {'prompt': ...} or "
                        f"{{'prompt_token_ids': ...}}) or a list of them, got {type(prompts).__name__}")
    return list(prompts)


class LLMEngine:

    def __init__(self, model, **kwargs):
        args = EngineArgs(model, kwargs)
        # tensor_parallel_size > 1: the other ranks are the package's nanovllm executable.
        worker = os.path.join(os.path.dirname(__file__), "bin", "nanovllm")
        # Structured outputs' engine defaults (JSON whitespace), applied to each request's params.
        self._structured_config = args.config.get("structured_outputs_config")
        with engine_messages():
            self._llm = _core.LLM(args.config, args.tokenizer_dir, args.skip_tokenizer_init, worker)
        with engine_messages():
            self._llm.check_dtype(args.dtype)
        self._generation = generation_defaults(args, self._llm.model_dir)
        self._max_model_len = self._llm.max_model_len
        self._vocab_size = self._llm.vocab_size

    @property
    def _engine(self):
        if self._llm is None:
            raise RuntimeError("this LLM has been shut down (exit() was called): make a new one")
        return self._llm

    def exit(self):
        """Frees the engine (nano-vllm's exit(); also done when the object goes away)."""
        self._llm = None

    shutdown = exit

    def _core_params(self, sp, what="sampling_params"):
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"{what} must be a nanovllm.SamplingParams (got {type(sp).__name__})")
        return sp.to_core(self._structured_config, self._max_model_len, self._vocab_size)

    def add_request(self, prompt, sampling_params: SamplingParams) -> int:
        """Queues one request; returns its id (the seq_id that step() reports)."""
        engine = self._engine
        with engine_messages():
            return engine.add_request(_prompt(prompt)[0], self._core_params(sampling_params))

    def step(self):
        """One engine step: ([(seq_id, completion_token_ids) of the requests that finished], n)
        with n the tokens of a prefill step or minus the sequences of a decode step."""
        engine = self._engine
        with engine_messages():
            outputs, num_tokens = engine.step()
        return [(o["request_id"], o["token_ids"]) for o in outputs], num_tokens

    def is_finished(self) -> bool:
        return not self._engine.has_unfinished()

    def get_default_sampling_params(self) -> SamplingParams:
        """vLLM's: the model's generation_config.json defaults (temperature, top_k, top_p, min_p,
        repetition_penalty, max_new_tokens as max_tokens), else SamplingParams()."""
        return SamplingParams.from_optional(**self._generation)

    def generate(self, prompts, sampling_params=None, use_tqdm=True, lora_request=None, **kwargs):
        """vLLM's LLM.generate: a RequestOutput per prompt, in order. prompts: a str, a list of token
        ids, {"prompt": str} or {"prompt_token_ids": [...]}, or a list of them; sampling_params:
        one for all, a list with one per prompt, or None for get_default_sampling_params().
        use_tqdm: a progress bar with the prefill and decode throughput on stderr (on a terminal)."""
        engine = self._engine
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported (lora_request)")
        priority = kwargs.pop("priority", None)
        for k, v in kwargs.items():
            if v is not None:
                raise TypeError(f"generate() got an unsupported keyword argument {k!r}")
        ps = [_prompt(p, f"prompts[{i}]") for i, p in enumerate(_prompt_list(prompts))]
        if sampling_params is None:
            sampling_params = self.get_default_sampling_params()
        if isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != len(ps):
                raise ValueError(f"The lengths of prompts and sampling_params must be the same "
                                 f"({len(ps)} prompts, {len(sampling_params)} sampling params)")
            sps = list(sampling_params)
        else:
            sps = [sampling_params]
        cores = [self._core_params(sp, f"sampling_params[{i}]" if len(sps) > 1 else "sampling_params")
                 for i, sp in enumerate(sps)]
        if priority is not None:  # vLLM's: one per prompt (--scheduling-policy priority)
            if not isinstance(priority, (list, tuple)) or len(priority) != len(ps):
                raise ValueError(f"priority must be a list with one int per prompt ({len(ps)} prompts)")
            cores = [with_priority(cores[i if len(cores) > 1 else 0], pr, f"priority[{i}]")
                     for i, pr in enumerate(priority)]
        if not ps:
            return []
        check_type("use_tqdm", use_tqdm, bool)
        with engine_messages():
            flat = engine.generate([p for p, _ in ps], cores, use_tqdm)
        outs, k = [], 0
        for i, (_, text) in enumerate(ps):
            sp = sps[i if len(sps) > 1 else 0]
            outs.append(_request_output(flat[k:k + sp.n], text, sp))
            k += sp.n
        return outs


def with_priority(core, priority, what="priority"):
    """A copy of the engine's params `core` with vLLM's request priority (the engine checks the policy)."""
    check_type(what, priority, int)
    if priority == 0:
        return core
    c = core.copy()
    c.priority = priority
    return c


def _request_output(choices, prompt_text, sp):
    """The engine's finished choices of one request (dicts, see python/_core) -> a RequestOutput."""
    first = choices[0]
    completions = []
    for c in choices:
        lps = logprob_dicts(c["logprobs"]) if c["logprobs"] is not None else None
        completions.append(CompletionOutput(index=c["index"], text=c["text"], token_ids=c["token_ids"],
                                            cumulative_logprob=cumulative_logprob(lps, c["token_ids"]), logprobs=lps,
                                            finish_reason=c["finish_reason"] or None,
                                            stop_reason=c.get("stop_reason")))
    prompt_lps = None
    if first["prompt_logprobs"] is not None:
        prompt_lps = [None] + logprob_dicts(first["prompt_logprobs"])
    return RequestOutput(request_id=str(first["request_id"]), prompt=prompt_text,
                         prompt_token_ids=first["prompt_token_ids"], prompt_logprobs=prompt_lps,
                         outputs=completions, finished=True, num_cached_tokens=first["num_cached_tokens"])
