"""nano-vllm's Python API on the C++ engine: ``from nanovllm import LLM, SamplingParams``."""
import importlib.util
import sys

# Where PyTorch is installed, it is loaded before our extension module. Measured on the GPU machine
# (torch 2.11+cu130, CUDA 13.0): `import nanovllm; import torch` aborts in torch's import with
# "free(): invalid pointer", while `import torch; import nanovllm` works, and nano-vllm's example.py
# imports nanovllm first, then transformers (which imports torch). Preloading any one of our shared
# libraries (cudart, cublasLt, NCCL, libgomp, OpenBLAS) alone does not reproduce it; the root cause
# is not isolated yet.
if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
    import torch  # noqa: F401

from nanovllm.llm import LLM  # noqa: E402
from nanovllm.llm_engine import LLMEngine  # noqa: E402
from nanovllm.sampling_params import SamplingParams  # noqa: E402

__all__ = ["LLM", "LLMEngine", "SamplingParams"]
