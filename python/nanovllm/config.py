"""LLM(model, **kwargs) keywords -> the engine's EngineConfig. nano-vllm's Config fields keep
their names and meaning; ours follow vLLM's. An unknown keyword is a TypeError naming it, a
wrong type a TypeError, a bad value a ValueError with the engine's message."""
import os
import re

from nanovllm import _core
from nanovllm._checks import check_type

# keyword -> (EngineConfig field, type); nano-vllm's Config first.
_FIELDS = {
    "max_num_batched_tokens": ("max_num_batched_tokens", int),
    "max_num_seqs": ("max_num_seqs", int),
    "max_model_len": ("max_model_len", int),  # unset: the model's, lowered to what the KV cache holds
    "gpu_memory_utilization": ("gpu_memory_utilization", float),
    "tensor_parallel_size": ("tensor_parallel_size", int),
    "enforce_eager": ("enforce_eager", bool),
    "kvcache_block_size": ("block_size", int),
    "num_kvcache_blocks": ("num_kvcache_blocks", int),  # -1 (nano-vllm) or unset: from the memory budget
    "device": ("device", str),
    "enable_prefix_caching": ("enable_prefix_caching", bool),
    "enable_chunked_prefill": ("enable_chunked_prefill", bool),
    "async_scheduling": ("async_scheduling", (bool, None)),  # None: on with CUDA, off on the CPU
    "seed": ("seed", int),
    "kv_cache_memory": ("kv_cache_memory", int),
    "num_threads": ("num_threads", int),
    "max_logprobs": ("max_logprobs", int),
    "logprobs_mode": ("logprobs_mode", str),
}
# Keywords that are not EngineConfig fields.
_OTHER = {"load_format": str, "tokenizer": (str, None), "skip_tokenizer_init": bool, "kernel_options": str,
          "kv_cache_dtype": str,  # auto, bf16, fp8, fp8_e4m3 (vLLM's names)
          "quantization": (str, None)}  # None, fp8, int8
# nano-vllm's Config fields that it derives itself: only their "unset" values are accepted.
_DERIVED = {"hf_config": None, "eos": -1}
# The engine's messages name CLI flags; these keywords are spelled differently.
_FLAG_TO_KEYWORD = {"block-size": "kvcache_block_size", "rank": "tensor_parallel_rank"}


class EngineArgs:
    """The checked keywords of LLM(model, **kwargs)."""

    def __init__(self, model, kwargs):
        unknown = sorted(k for k in kwargs if k not in _FIELDS and k not in _OTHER and k not in _DERIVED)
        if unknown:
            raise TypeError(f"LLM() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(k) for k in unknown)}")
        model = os.fspath(model) if isinstance(model, os.PathLike) else model
        check_type("model", model, str)
        for k, unset in _DERIVED.items():
            if k in kwargs and kwargs[k] != unset:
                raise ValueError(f"{k}: derived from the model (config.json, generation_config.json); "
                                 f"it cannot be set (leave it at {unset!r})")
        cfg = _core.EngineConfig()
        cfg.model = model
        for k, v in kwargs.items():
            if k in _FIELDS:
                name, typ = _FIELDS[k]
                check_type(k, v, typ)
                if k == "num_kvcache_blocks" and v == -1:
                    v = 0
                if k == "seed" and v < 0:
                    raise ValueError(f"seed must be >= 0 (got {v})")
                setattr(cfg, name, v)
            elif k in _OTHER:
                check_type(k, v, _OTHER[k])
        load_format = kwargs.get("load_format", "auto")
        if load_format not in ("auto", "safetensors", "dummy"):
            raise ValueError(f"load_format must be auto, safetensors or dummy (got {load_format!r})")
        cfg.load_dummy = load_format == "dummy"
        with engine_messages():
            cfg.kv_cache_dtype = kwargs.get("kv_cache_dtype", "auto")
            cfg.quantization = kwargs.get("quantization") or "none"
            cfg.apply_kernel_options(kwargs.get("kernel_options", ""))
            cfg.validate()
        self.config = cfg
        self.skip_tokenizer_init = kwargs.get("skip_tokenizer_init", False)
        self.tokenizer_dir = kwargs.get("tokenizer") or self._preset_tokenizer(model)

    @staticmethod
    def _preset_tokenizer(model):
        """The package's copy of the Qwen3 tokenizer for a built-in preset (qwen3-0.6b, ...), unless
        $NANOVLLM_TOKENIZER_DIR names one."""
        if model not in _core.preset_names() or os.path.exists(os.path.join(model, "tokenizer.json")):
            return ""
        if os.environ.get("NANOVLLM_TOKENIZER_DIR"):
            return os.environ["NANOVLLM_TOKENIZER_DIR"]
        d = os.path.join(os.path.dirname(__file__), "tokenizers", "qwen3")
        return d if os.path.exists(os.path.join(d, "tokenizer.json")) else ""


class engine_messages:
    """Rewrites the engine's CLI flag names (--max-num-seqs) to keywords (max_num_seqs) in the
    ValueErrors raised inside it."""

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if isinstance(exc, ValueError) and exc.args:
            msg = re.sub(r"--([a-z][a-z-]*)", lambda m: _FLAG_TO_KEYWORD.get(m.group(1), m.group(1).replace("-", "_")),
                         str(exc.args[0]))
            raise ValueError(msg) from None
        return False
