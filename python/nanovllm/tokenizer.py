"""LLM.get_tokenizer(): the engine's tokenizer with the part of Hugging Face's tokenizer interface
that vLLM scripts use (encode, decode, __call__, apply_chat_template, convert_ids_to_tokens,
eos_token_id, vocab_size, len). Defaults are Hugging Face's (decode keeps special tokens;
apply_chat_template tokenizes and adds no generation prompt unless asked)."""
import json


class Tokenizer:

    def __init__(self, core_llm, core_tokenizer, render):
        self._llm = core_llm  # keeps the engine (and so the tokenizer) alive
        self._tok = core_tokenizer
        self._render = render  # (conversation, tools, add_generation_prompt, continue_final_message, template, kwargs)

    def encode(self, text, add_special_tokens=True, **kwargs):
        _no_kwargs("encode", kwargs)
        return self._tok.encode(text, add_special_tokens)

    def __call__(self, text, add_special_tokens=True, **kwargs):
        """{"input_ids": ids} of a text, or of each of a list of texts."""
        _no_kwargs("__call__", kwargs)
        if isinstance(text, (list, tuple)):
            return {"input_ids": [self.encode(t, add_special_tokens) for t in text]}
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, token_ids, skip_special_tokens=False, **kwargs):
        _no_kwargs("decode", kwargs)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self._tok.decode(list(token_ids), skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens=False):
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        if isinstance(ids, int):
            return self._tok.id_to_token(ids)
        return [self._tok.id_to_token(i) for i in ids if not (skip_special_tokens and self._tok.is_special(i))]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._tok.token_to_id(tokens)
        return [self._tok.token_to_id(t) for t in tokens]

    def convert_tokens_to_string(self, tokens):
        return self.decode([self._tok.token_to_id(t) for t in tokens])

    def apply_chat_template(self, conversation, tools=None, add_generation_prompt=False, tokenize=True,
                            continue_final_message=False, chat_template=None, **kwargs):
        """The conversation through the model's chat template (or `chat_template`); extra keyword
        arguments are template variables (enable_thinking=False ...). Token ids unless tokenize=False."""
        for k in ("return_tensors", "return_dict", "padding", "truncation", "max_length"):
            if kwargs.get(k) not in (None, False):
                raise ValueError(f"apply_chat_template: {k} is not supported")
            kwargs.pop(k, None)
        text = self._render(conversation, tools, add_generation_prompt, continue_final_message, chat_template, kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def get_vocab(self):
        return {self._tok.id_to_token(i): i for i in range(self._tok.vocab_size)}

    @property
    def vocab_size(self):
        return self._tok.base_vocab_size

    def __len__(self):
        return self._tok.vocab_size

    @property
    def eos_token(self):
        return self._tok.eos_token or None

    @property
    def bos_token(self):
        return self._tok.bos_token or None

    @property
    def eos_token_id(self):
        return self._tok.token_to_id(self._tok.eos_token) if self._tok.eos_token else None

    @property
    def bos_token_id(self):
        return self._tok.token_to_id(self._tok.bos_token) if self._tok.bos_token else None

    @property
    def chat_template(self):
        return self._tok.chat_template or None

    @property
    def all_special_ids(self):
        return [i for i in range(self._tok.vocab_size) if self._tok.is_special(i)]

    @property
    def all_special_tokens(self):
        return [self._tok.id_to_token(i) for i in self.all_special_ids]

    def __repr__(self):
        return f"nanovllm.Tokenizer(vocab_size={self.vocab_size}, len={len(self)})"


def _no_kwargs(name, kwargs):
    if kwargs:
        raise TypeError(f"Tokenizer.{name}() got unsupported keyword arguments: {', '.join(sorted(kwargs))}")


def render_chat(core_llm, conversation, tools, add_generation_prompt, continue_final_message, chat_template, kwargs):
    """One conversation -> prompt text, as vLLM and Hugging Face: continue_final_message renders
    without a generation prompt and cuts the text after the last message's content."""
    if add_generation_prompt and continue_final_message:
        raise ValueError("continue_final_message and add_generation_prompt cannot both be set: "
                         "add_generation_prompt starts a new message, continue_final_message extends the last one")
    if not isinstance(conversation, (list, tuple)) or not all(isinstance(m, dict) for m in conversation):
        raise TypeError("a conversation must be a list of message dicts ({'role': ..., 'content': ...})")
    # Content parts joined, null content "", tool-call arguments parsed: as the server (frontend/chat_messages.h).
    text, final = core_llm.apply_chat_template(json.dumps(conversation), json.dumps(tools) if tools else "",
                                               add_generation_prompt and not continue_final_message,
                                               json.dumps(kwargs or {}), chat_template or "")
    if continue_final_message:
        stripped = final.strip()
        if not stripped or stripped not in text:
            raise ValueError("continue_final_message is set but the final message does not appear in the chat "
                             "after applying the chat template")
        at = text.rindex(stripped)
        keep = len(final.lstrip()) if text[at:at + len(final.lstrip())] == final.lstrip() else len(stripped)
        text = text[:at + keep]
    return text

