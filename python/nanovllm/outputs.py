"""vLLM's output classes (vllm.outputs, vllm.logprobs): RequestOutput with one CompletionOutput per
parallel sample, logprobs as vLLM's list of {token_id: Logprob}. nano-vllm's scripts read a
generate() output as a dict (o["text"], o["token_ids"]): a RequestOutput answers those too, from
its first sample."""
from dataclasses import dataclass, field


@dataclass
class Logprob:
    """vllm.logprobs.Logprob: the log probability of a token, its rank among the vocabulary (1 is
    the most likely) and its text (the id decoded alone)."""
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def logprob_dicts(entries):
    """[[(token_id, logprob, rank, decoded_token), ...] per position] -> vLLM's [{token_id: Logprob}]
    (the sampled or prompt token first, then the top N; a token in both keeps its first place)."""
    out = []
    for step in entries:
        d = {}
        for t, lp, r, text in step:
            d.setdefault(t, Logprob(lp, r, text))
        out.append(d)
    return out


def cumulative_logprob(logprobs, token_ids):
    """vLLM's CompletionOutput.cumulative_logprob: the sum of the sampled tokens' logprobs (None
    when the request asked for no logprobs)."""
    return sum(step[t].logprob for step, t in zip(logprobs, token_ids)) if logprobs is not None else None


@dataclass
class CompletionOutput:
    """vllm.outputs.CompletionOutput: one sample of a request."""
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """vllm.outputs.RequestOutput: a request's prompt and its samples (`outputs`, by index)."""
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: list[dict[int, Logprob] | None] | None
    outputs: list[CompletionOutput]
    finished: bool
    metrics: object = None  # vLLM's offline mode (no stats logging) gives None too
    num_cached_tokens: int | None = None
    encoder_prompt: str | None = None
    encoder_prompt_token_ids: list[int] | None = None
    lora_request: object = None
    kv_transfer_params: dict | None = None

    # nano-vllm's generate() returned {"text", "token_ids"}: its scripts keep working.
    def __getitem__(self, key):
        if key in ("text", "token_ids"):
            return getattr(self.outputs[0], key)
        raise KeyError(f"{key!r}: a RequestOutput answers o['text'] and o['token_ids'] (nano-vllm's dict); "
                       "the rest is in its attributes (o.outputs[0].text, o.prompt_token_ids, ...)")

    def keys(self):
        return ("text", "token_ids")

    def __iter__(self):
        return iter(self.keys())

    def __contains__(self, key):
        return key in self.keys()
