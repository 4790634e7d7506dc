"""nano-vllm's LLM: the engine itself (``class LLM(LLMEngine): pass``)."""
from nanovllm.llm_engine import LLMEngine


class LLM(LLMEngine):
    pass
