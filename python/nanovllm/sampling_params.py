"""vLLM's SamplingParams (nano-vllm's temperature, max_tokens and ignore_eos are among its fields),
and structured outputs as vLLM's
StructuredOutputsParams (and its older GuidedDecodingParams). Values are checked when made: a wrong
type is a TypeError, an out-of-range value a ValueError with the engine's message."""
import enum
import json as _json
from dataclasses import KW_ONLY, dataclass, fields, replace

from nanovllm import _core
from nanovllm._checks import check_type

_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def _schema(value):
    """A JSON schema given as a dict, its JSON text, or a pydantic model class (its schema)."""
    if hasattr(value, "model_json_schema"):
        return value.model_json_schema()
    return value


@dataclass
class StructuredOutputsParams:
    """vLLM's vllm.sampling_params.StructuredOutputsParams: exactly one of json (a schema: dict, JSON
    text or pydantic model), regex, choice, grammar (EBNF) or json_object. disable_any_whitespace
    None: the engine's structured_outputs_config decides (compact JSON by default)."""
    json: str | dict | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_fallback: bool = False
    disable_any_whitespace: bool | None = None
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    def __post_init__(self):
        self.json = _schema(self.json)
        for name, spec in _PARAM_TYPES.items():
            check_type(name, getattr(self, name), spec)
        given = [k for k in _KINDS if getattr(self, k) not in (None, False)]
        if len(given) > 1:
            raise ValueError("You can only use one kind of structured outputs constraint but multiple are "
                             f"specified: {', '.join(given)}")
        if not given:
            raise ValueError("You must use one kind of structured outputs constraint but none are specified: "
                             "json, regex, choice, grammar or json_object")

    def _fields(self):
        """The request's structured_outputs object (the server's JSON; unset fields left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass
class GuidedDecodingParams(StructuredOutputsParams):
    """vLLM's older name, with `backend` (auto, xgrammar, guidance, outlines, nanovllm: all ours)."""
    backend: str | None = None

    def _fields(self):
        return {k: v for k, v in super()._fields().items() if k != "backend"}


_PARAM_TYPES = {
    "json": (str, {str: object}, None), "regex": (str, None), "choice": ([str], None), "grammar": (str, None),
    "json_object": (bool, None), "disable_fallback": bool, "disable_any_whitespace": (bool, None),
    "disable_additional_properties": bool, "whitespace_pattern": (str, None), "structural_tag": (str, None),
}


def _structured_request(so, guided):
    """The request JSON of a SamplingParams' structured outputs (the server's field names)."""
    if so is not None and guided is not None:
        raise ValueError("give structured_outputs or guided_decoding, not both")
    if guided is not None:
        body = {"structured_outputs": guided._fields()}
        if guided.backend is not None:
            body["guided_decoding_backend"] = guided.backend
        return body
    return {"structured_outputs": so._fields()} if so is not None else {}


class RequestOutputKind(enum.IntEnum):
    """vLLM's: what each streamed RequestOutput of AsyncLLM holds (LLM.generate returns final ones)."""
    CUMULATIVE = 0  # everything so far
    DELTA = 1  # only what is new
    FINAL_ONLY = 2  # one output, at the end


# Fields vLLM has that we do not implement: refused unless left at their default.
_UNSUPPORTED = {"truncate_prompt_tokens": None, "logits_processors": None, "extra_args": None}


@dataclass
class SamplingParams:
    """vLLM's SamplingParams (vllm.SamplingParams, same names, defaults and meaning), which also takes
    nano-vllm's (temperature, max_tokens, ignore_eos). max_tokens None: up to the context length."""
    # nano-vllm's three fields first (its scripts may pass them by position); the rest by keyword.
    temperature: float = 1.0  # 0: greedy (nano-vllm refuses it; we allow it, as vLLM)
    max_tokens: int | None = 16
    ignore_eos: bool = False
    _: KW_ONLY
    n: int = 1
    best_of: int | None = None  # equal to n (vLLM V1 has no other)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    min_tokens: int = 0
    logprobs: int | None = None  # the sampled token's and the top N's (-1: the whole vocabulary)
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    structured_outputs: StructuredOutputsParams | None = None
    guided_decoding: GuidedDecodingParams | None = None  # vLLM's older name
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    truncate_prompt_tokens: int | None = None
    logits_processors: list | None = None
    extra_args: dict | None = None

    def __post_init__(self):
        self._core = None
        self.to_core()  # checks every field now, not at generate time

    @staticmethod
    def from_optional(**kwargs):
        """vLLM's: the fields given, None meaning the default."""
        return SamplingParams(**{k: v for k, v in kwargs.items() if v is not None})

    def clone(self):
        return replace(self)

    def to_core(self, structured_config=None, max_model_len=None, vocab_size=None):
        """The engine's SamplingParams, checked (cached until a field changes). structured_config:
        the engine's structured_outputs_config (JSON text; None: the defaults); max_model_len: what
        max_tokens=None stands for; vocab_size: what logprobs=-1 stands for."""
        key = tuple(repr(getattr(self, f.name)) for f in fields(self)) + (structured_config, max_model_len, vocab_size)
        if self._core is not None and self._core[0] == key:
            return self._core[1]
        for f in fields(self):
            check_type(f.name, getattr(self, f.name), _TYPES[f.name])
        for name, default in _UNSUPPORTED.items():
            if getattr(self, name) != default:
                raise ValueError(f"{name} is not supported by nanovllm (leave it at {default!r})")
        if not self.spaces_between_special_tokens:
            raise ValueError("spaces_between_special_tokens=False is not supported (fast tokenizers, as vLLM's "
                             "default detokenizer, ignore it)")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError(f"best_of must equal n (got best_of={self.best_of}, n={self.n}): vLLM V1 removed "
                             "best_of > n, and so do we")
        if self.allowed_token_ids is not None and not self.allowed_token_ids:
            raise ValueError("allowed_token_ids is not None and empty!")
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed must be >= 0 (got {self.seed})")
        for name in ("logprobs", "prompt_logprobs"):
            v = getattr(self, name)
            if v is not None and v < -1:
                raise ValueError(f"{name} must be non-negative or -1 (the whole vocabulary), got {v}.")
        sp = _core.SamplingParams()
        for name in _SCALARS:
            setattr(sp, name, getattr(self, name))
        sp.max_tokens = self.max_tokens if self.max_tokens is not None else (max_model_len or 1 << 30)
        sp.seed = self.seed
        whole = vocab_size or 1 << 30
        sp.logprobs = whole if self.logprobs == -1 else self.logprobs
        sp.prompt_logprobs = whole if self.prompt_logprobs == -1 else self.prompt_logprobs
        sp.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        sp.stop_token_ids = list(self.stop_token_ids or [])
        sp.bad_words = list(self.bad_words or [])
        sp.allowed_token_ids = list(self.allowed_token_ids or [])
        sp.logit_bias = sorted((self.logit_bias or {}).items())
        request = _structured_request(self.structured_outputs, self.guided_decoding)
        if request:
            sp.structured_outputs = _core.read_structured_outputs(_json.dumps(request), structured_config or "{}")
        sp.validate()
        self._core = (key, sp)
        return sp


_SCALARS = ["n", "temperature", "ignore_eos", "top_k", "top_p", "min_p", "presence_penalty",
            "frequency_penalty", "repetition_penalty", "min_tokens", "skip_special_tokens",
            "include_stop_str_in_output", "detokenize"]
_TYPES = {
    "n": int, "best_of": (int, None), "temperature": float, "max_tokens": (int, None), "ignore_eos": bool,
    "top_k": int, "top_p": float, "min_p": float, "seed": (int, None), "stop": (str, [str], None),
    "stop_token_ids": ([int], None), "bad_words": ([str], None), "presence_penalty": float,
    "frequency_penalty": float, "repetition_penalty": float, "min_tokens": int, "logprobs": (int, None),
    "prompt_logprobs": (int, None), "detokenize": bool, "skip_special_tokens": bool,
    "spaces_between_special_tokens": bool, "include_stop_str_in_output": bool,
    "logit_bias": ({int: float}, None), "allowed_token_ids": ([int], None),
    "structured_outputs": (StructuredOutputsParams, None), "guided_decoding": (GuidedDecodingParams, None),
    "output_kind": RequestOutputKind, "truncate_prompt_tokens": (int, None), "logits_processors": (list, None),
    "extra_args": (dict, None),
}
