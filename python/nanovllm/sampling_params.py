"""nano-vllm's SamplingParams (temperature, max_tokens, ignore_eos and their defaults) plus the
engine's other sampling fields with vLLM's names. Values are checked when made: a wrong type is
a TypeError, an out-of-range value a ValueError with the engine's message."""
from dataclasses import dataclass, field, fields

from nanovllm import _core
from nanovllm._checks import check_type


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

    def __post_init__(self):
        self._core = None
        self.to_core()  # checks every field now, not at generate time

    def to_core(self):
        """The engine's SamplingParams, checked (cached until a field changes)."""
        key = tuple(repr(getattr(self, f.name)) for f in fields(self))
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
}
