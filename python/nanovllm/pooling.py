"""vLLM's pooling API for pooling models (--runner pooling, or a Sentence-Transformers / sequence-
classification checkpoint): PoolingParams, the output classes (vllm.outputs.PoolingRequestOutput and
its Embedding / Classification / Scoring forms, read as ``o.outputs.embedding`` and so on), and the
LLM methods embed(), classify(), encode() and score() that llm.py mixes into LLM."""
from dataclasses import dataclass, field

from nanovllm._checks import check_type
from nanovllm.config import engine_messages


@dataclass
class PoolingParams:
    """vllm.PoolingParams: dimensions (Matryoshka; embed), normalize (embed), activation (classify,
    score; vLLM's older name: softmax), task (set by the call)."""
    dimensions: int | None = None
    normalize: bool | None = None
    activation: bool | None = None
    truncate_prompt_tokens: int | None = None
    task: str | None = None


@dataclass
class PoolingOutput:
    data: list[float]


@dataclass
class EmbeddingOutput:
    embedding: list[float]

    @property
    def hidden_size(self) -> int:
        return len(self.embedding)


@dataclass
class ClassificationOutput:
    probs: list[float]

    @property
    def num_classes(self) -> int:
        return len(self.probs)


@dataclass
class ScoringOutput:
    score: float


@dataclass
class PoolingRequestOutput:
    """vllm.outputs.PoolingRequestOutput (and, by its `outputs`, EmbeddingRequestOutput,
    ClassificationRequestOutput, ScoringRequestOutput)."""
    request_id: str
    outputs: object
    prompt_token_ids: list[int]
    finished: bool = True


EmbeddingRequestOutput = ClassificationRequestOutput = ScoringRequestOutput = PoolingRequestOutput


def _pooling_params(pooling_params, truncate_prompt_tokens):
    p = pooling_params if pooling_params is not None else PoolingParams()
    if isinstance(p, (list, tuple)):
        if len({(q.dimensions, q.normalize, q.activation) for q in p}) > 1:
            raise ValueError("pooling_params: one PoolingParams for all prompts (different ones are not supported)")
        p = p[0]
    if not isinstance(p, PoolingParams):
        raise TypeError(f"pooling_params must be a nanovllm.PoolingParams (got {type(p).__name__})")
    trunc = truncate_prompt_tokens if truncate_prompt_tokens is not None else p.truncate_prompt_tokens
    if trunc is not None:
        check_type("truncate_prompt_tokens", trunc, int)
    return p, trunc


class PoolingMixin:
    """LLM's pooling calls, over the engine's encode_pooling / score."""

    def _truncated(self, prompts, trunc):
        from nanovllm.llm_engine import _prompt, _prompt_list
        ps = [_prompt(p, f"prompts[{i}]")[0] for i, p in enumerate(_prompt_list(prompts))]
        if trunc is None:
            return ps
        if trunc == -1:
            trunc = self._max_model_len
        if trunc < 1:
            raise ValueError("truncate_prompt_tokens must be -1 or at least 1")
        out = []
        for p in ps:
            ids = self._engine.encode(p, True) if isinstance(p, str) else p
            out.append(list(ids[-trunc:]))  # vLLM keeps the last tokens
        return out

    def encode(self, prompts, pooling_params=None, use_tqdm=True, lora_request=None, pooling_task=None,
               truncate_prompt_tokens=None):
        """vLLM's LLM.encode: a PoolingRequestOutput per prompt, outputs.data the pooled output
        (pooling_task: embed, classify or score; unset: the model's first task)."""
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported (lora_request)")
        tasks = self._engine.pooling_tasks
        if not tasks:
            raise ValueError("LLM.encode() is only supported for pooling models (runner='pooling')")
        task = pooling_task or tasks[0]
        if task not in tasks:
            raise ValueError(f"pooling_task must be one of {tasks}.")
        p, trunc = _pooling_params(pooling_params, truncate_prompt_tokens)
        ps = self._truncated(prompts, trunc)
        if not ps:
            return []
        with engine_messages():
            flat = self._engine.encode_pooling(ps, task, p.dimensions, p.normalize, p.activation, bool(use_tqdm))
        return [PoolingRequestOutput(str(rid), PoolingOutput(list(v)), list(ids)) for rid, ids, v in flat]

    def embed(self, prompts, pooling_params=None, use_tqdm=True, lora_request=None, truncate_prompt_tokens=None):
        """vLLM's LLM.embed: an EmbeddingRequestOutput per prompt (o.outputs.embedding)."""
        outs = self.encode(prompts, pooling_params, use_tqdm, lora_request, "embed", truncate_prompt_tokens)
        return [PoolingRequestOutput(o.request_id, EmbeddingOutput(o.outputs.data), o.prompt_token_ids) for o in outs]

    def classify(self, prompts, pooling_params=None, use_tqdm=True, lora_request=None, truncate_prompt_tokens=None):
        """vLLM's LLM.classify: a ClassificationRequestOutput per prompt (o.outputs.probs)."""
        outs = self.encode(prompts, pooling_params, use_tqdm, lora_request, "classify", truncate_prompt_tokens)
        return [PoolingRequestOutput(o.request_id, ClassificationOutput(o.outputs.data), o.prompt_token_ids)
                for o in outs]

    def score(self, data_1, data_2, truncate_prompt_tokens=None, use_tqdm=True, pooling_params=None,
              lora_request=None, **kwargs):
        """vLLM's LLM.score: a ScoringRequestOutput per (data_1, data_2) pair, 1:1, 1:N or N:N. A
        classification model (cross-encoder, Qwen3-Reranker) scores the pair's tokens joined; an
        embedding model gives the cosine similarity of the two embeddings."""
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported (lora_request)")
        for k, v in kwargs.items():
            if v is not None:
                raise TypeError(f"score() got an unsupported keyword argument {k!r}")
        if not self._engine.pooling_tasks:
            raise ValueError("LLM.score() is only supported for pooling models (runner='pooling')")
        p, trunc = _pooling_params(pooling_params, truncate_prompt_tokens)
        if p.dimensions is not None or p.normalize is not None:
            raise ValueError("score: pooling_params supports activation only")
        qs, ds = self._truncated(data_1, trunc), self._truncated(data_2, trunc)
        with engine_messages():
            scores = self._engine.score(qs, ds, p.activation)
        return [PoolingRequestOutput(str(i), ScoringOutput(float(s)), []) for i, s in enumerate(scores)]
