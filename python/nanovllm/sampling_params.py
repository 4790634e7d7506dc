"""nano-vllm's SamplingParams (temperature, max_tokens, ignore_eos and their defaults) plus the
engine's other sampling fields with vLLM's names, and structured outputs as vLLM's
StructuredOutputsParams (and its older GuidedDecodingParams). Values are checked when made: a wrong
type is a TypeError, an out-of-range value a ValueError with the engine's message."""
import json as _json
from dataclasses import dataclass, field, fields

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


@dataclass
class SamplingParams:
    temperature: float = 1.0  # 0: greedy (nano-vllm refuses it; we allow it, as vLLM)
    max_tokens: int = 64
    ignore_eos: bool = False
    top_k: int = 0  # 0 or -1: off
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    logit_bias: dict[int, float] | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: StructuredOutputsParams | None = None
    guided_decoding: GuidedDecodingParams | None = None  # vLLM's older name

    def __post_init__(self):
        self._core = None
        self.to_core()  # checks every field now, not at generate time

    def to_core(self, structured_config=None):
        """The engine's SamplingParams, checked (cached until a field changes). structured_config:
        the engine's structured_outputs_config (JSON text; None: the defaults)."""
        key = tuple(repr(getattr(self, f.name)) for f in fields(self)) + (structured_config,)
        if self._core is not None and self._core[0] == key:
            return self._core[1]
        for f in fields(self):
            check_type(f.name, getattr(self, f.name), _TYPES[f.name])
        sp = _core.SamplingParams()
        for name in _SCALARS:
            setattr(sp, name, getattr(self, name))
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed must be >= 0 (got {self.seed})")
        sp.seed = self.seed
        sp.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        sp.stop_token_ids = list(self.stop_token_ids or [])
        sp.logit_bias = sorted((self.logit_bias or {}).items())
        request = _structured_request(self.structured_outputs, self.guided_decoding)
        if request:
            sp.structured_outputs = _core.read_structured_outputs(_json.dumps(request), structured_config or "{}")
        sp.validate()
        self._core = (key, sp)
        return sp


_SCALARS = ["temperature", "max_tokens", "ignore_eos", "top_k", "top_p", "min_p", "presence_penalty",
            "frequency_penalty", "repetition_penalty", "min_tokens", "skip_special_tokens",
            "include_stop_str_in_output"]
_TYPES = {
    "temperature": float, "max_tokens": int, "ignore_eos": bool, "top_k": int, "top_p": float, "min_p": float,
    "seed": (int, None), "stop": (str, [str], None), "stop_token_ids": ([int], None),
    "presence_penalty": float, "frequency_penalty": float, "repetition_penalty": float, "min_tokens": int,
    "logit_bias": ({int: float}, None), "skip_special_tokens": bool, "include_stop_str_in_output": bool,
    "structured_outputs": (StructuredOutputsParams, None), "guided_decoding": (GuidedDecodingParams, None),
}
