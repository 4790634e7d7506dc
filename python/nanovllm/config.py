"""LLM(model, **kwargs) keywords -> the engine's EngineConfig. The keywords come from the engine's
settings table (_core.settings(); src/nanovllm/config/settings_table.cpp): nano-vllm's Config fields keep
their names and meaning, ours follow vLLM's. An unknown keyword is a TypeError naming it, a wrong
type a TypeError, a bad value a ValueError with the engine's message."""
import json
import os
import re
import sys

from nanovllm import _core
from nanovllm._checks import check_type

_SETTINGS = _core.settings()
_TYPES = {"bool": bool, "optional_bool": bool, "int": int, "float": float, "str": str, "choice": str}
# keyword -> setting of the table
_KEYWORDS = {k: s for s in _SETTINGS for k in s["keywords"]}
# Keywords that are not engine settings: vLLM's that act in the Python layer.
_OTHER = {"tokenizer": (str, None), "skip_tokenizer_init": bool, "dtype": str, "trust_remote_code": bool,
          "generation_config": str, "override_generation_config": ({str: object}, None)}
# nano-vllm's Config fields that it derives itself: only their "unset" values are accepted.
_DERIVED = {"hf_config": None, "eos": -1}
# The engine's messages name CLI flags; keywords spelled otherwise than the flag are put back.
_FLAG_TO_KEYWORD = {"rank": "tensor_parallel_rank"}
_FLAG_TO_KEYWORD.update({s["flags"][0][2:]: s["keywords"][0] for s in _SETTINGS if s["flags"] and s["keywords"]})


def _type_of(setting):
    t = _TYPES[setting["type"]]
    return (t, None) if setting["python_none"] or setting["type"] == "optional_bool" else t


class EngineArgs:
    """The checked keywords of LLM(model, **kwargs)."""

    def __init__(self, model, kwargs):
        unknown = sorted(k for k in kwargs if k not in _KEYWORDS and k not in _OTHER and k not in _DERIVED)
        if unknown:
            raise TypeError(f"LLM() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(k) for k in unknown)}")
        model = os.fspath(model) if isinstance(model, os.PathLike) else model
        check_type("model", model, str)
        for k, unset in _DERIVED.items():
            if k in kwargs and kwargs[k] != unset:
                raise ValueError(f"{k}: derived from the model (config.json, generation_config.json); "
                                 f"it cannot be set (leave it at {unset!r})")
        if isinstance(kwargs.get("structured_outputs_config"), dict):  # vLLM takes a dict: the setting's JSON
            kwargs = dict(kwargs, structured_outputs_config=json.dumps(kwargs["structured_outputs_config"]))
        if isinstance(kwargs.get("speculative_config"), dict):  # vLLM takes a dict: the setting's JSON
            kwargs = dict(kwargs, speculative_config=json.dumps(kwargs["speculative_config"]))
        for key in ("hf_overrides", "pooler_config", "override_pooler_config"):  # dicts too (pooling)
            if isinstance(kwargs.get(key), dict):
                kwargs = dict(kwargs, **{key: json.dumps(kwargs[key])})
        for k, v in kwargs.items():
            if k not in _DERIVED:
                check_type(k, v, _type_of(_KEYWORDS[k]) if k in _KEYWORDS else _OTHER[k])
        cfg = _core.EngineConfig()
        cfg.model = model
        with engine_messages():
            cfg.apply_kernel_env_overrides()  # as the CLI: NANOVLLM_* first, kernel_options over them
            for k, v in kwargs.items():
                if k in _KEYWORDS and v is not None:
                    cfg.set(_KEYWORDS[k]["name"], v)
            cfg.validate()
        self.config = cfg
        if kwargs.get("trust_remote_code"):
            print("note: trust_remote_code accepted; nothing remote is run (the model code is built in)",
                  file=sys.stderr)
        self.dtype = kwargs.get("dtype", "auto")
        with engine_messages():
            _core.check_dtype_name(self.dtype)  # the name now; against the backend once it is up
        # generation_config: "auto" (the model's generation_config.json), "vllm" (none) or a directory;
        # read by generation_defaults() once the model's directory is settled.
        self.generation_config = kwargs.get("generation_config", "auto")
        self.override_generation_config = kwargs.get("override_generation_config")
        self.skip_tokenizer_init = kwargs.get("skip_tokenizer_init", False)
        self.tokenizer_dir = kwargs.get("tokenizer") or self._preset_tokenizer(model)

    @staticmethod
    def _preset_tokenizer(model):
        """The package's copy of a built-in preset's tokenizer (the engine names which: Qwen3's for the
        Qwen presets, Llama 3's for the Llama ones, none for Mistral), unless $NANOVLLM_TOKENIZER_DIR
        names one; "" leaves the choice to the engine (the model's own, or that variable)."""
        name = _core.preset_tokenizer_name(model)
        if not name or os.environ.get("NANOVLLM_TOKENIZER_DIR") or os.path.exists(os.path.join(model, "tokenizer.json")):
            return ""
        d = os.path.join(os.path.dirname(__file__), "tokenizers", name)
        return d if os.path.exists(os.path.join(d, "tokenizer.json")) else ""


def generation_defaults(args, model_dir):
    """The sampling defaults of args' generation_config (vLLM's names) for the model in model_dir."""
    override = args.override_generation_config
    with engine_messages():
        return json.loads(_core.generation_defaults(args.generation_config, model_dir,
                                                    json.dumps(override) if override else ""))


class engine_messages:
    """Rewrites the engine's CLI flag names (--max-num-seqs) to keywords (max_num_seqs) in the
    ValueErrors raised inside it."""

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if isinstance(exc, ValueError) and exc.args:
            # `quoted` commands (huggingface-cli download ... --revision v2) keep their flags, and
            # so do paths (models--ORG--NAME: a "--" inside a word is no flag).
            parts = str(exc.args[0]).split("`")
            parts[::2] = [re.sub(r"(?<![\w-])--([a-z][a-z-]*)",
                                 lambda m: _FLAG_TO_KEYWORD.get(m.group(1), m.group(1).replace("-", "_")), p)
                          for p in parts[::2]]
            raise ValueError("`".join(parts)) from None
        return False
