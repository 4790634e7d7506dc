"""nano-vllm's Python API on the C++ engine: ``from nanovllm import LLM, SamplingParams``."""
from nanovllm.llm import LLM
from nanovllm.llm_engine import LLMEngine
from nanovllm.sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams

__all__ = ["LLM", "LLMEngine", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams"]
