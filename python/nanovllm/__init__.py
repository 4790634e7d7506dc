"""nano-vllm's Python API on the C++ engine (``from nanovllm import LLM, SamplingParams``), which is
also vLLM's offline API: LLM.generate / chat / get_tokenizer returning RequestOutputs, SamplingParams
with vLLM's fields, AsyncLLM for asyncio servers."""
from nanovllm.async_llm import AsyncLLM
from nanovllm.llm import LLM
from nanovllm.llm_engine import LLMEngine
from nanovllm.outputs import CompletionOutput, Logprob, RequestOutput
from nanovllm.pooling import (ClassificationOutput, EmbeddingOutput, EmbeddingRequestOutput, PoolingOutput,
                              PoolingParams, PoolingRequestOutput, ScoringOutput, ScoringRequestOutput)
from nanovllm.sampling_params import (GuidedDecodingParams, RequestOutputKind, SamplingParams,
                                      StructuredOutputsParams)
from nanovllm.tokenizer import Tokenizer

__all__ = ["LLM", "LLMEngine", "AsyncLLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob",
           "RequestOutputKind", "StructuredOutputsParams", "GuidedDecodingParams", "Tokenizer",
           "PoolingParams", "PoolingOutput", "PoolingRequestOutput", "EmbeddingOutput", "EmbeddingRequestOutput",
           "ClassificationOutput", "ScoringOutput", "ScoringRequestOutput"]
