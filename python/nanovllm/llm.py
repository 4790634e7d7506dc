"""vLLM's LLM (vllm.LLM): nano-vllm's LLM (``class LLM(LLMEngine)``) with vLLM's chat() and
get_tokenizer() on top of LLMEngine's generate(), and the pooling calls (embed, classify, encode,
score: pooling.py)."""
from nanovllm.llm_engine import LLMEngine
from nanovllm.pooling import PoolingMixin
from nanovllm.tokenizer import Tokenizer, render_chat


class LLM(PoolingMixin, LLMEngine):

    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer with Hugging Face's interface (encode, decode, apply_chat_template,
        convert_ids_to_tokens, eos_token_id, vocab_size, len)."""
        engine = self._engine
        tok = engine.tokenizer()
        if tok is None:
            raise ValueError("the model has no tokenizer (skip_tokenizer_init=True, or no tokenizer.json)")
        return Tokenizer(engine, tok, lambda *a: render_chat(engine, *a))

    def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None, chat_template=None,
             chat_template_content_format="auto", add_generation_prompt=True, continue_final_message=False,
             tools=None, chat_template_kwargs=None, mm_processor_kwargs=None):
        """vLLM's LLM.chat: one conversation (a list of {"role", "content"} messages) or a list of
        conversations, each rendered by the model's chat template (or `chat_template`, a Jinja
        string) with `tools` and `chat_template_kwargs`, then generated as generate() does."""
        engine = self._engine
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported (lora_request)")
        if mm_processor_kwargs:
            raise ValueError("multimodal inputs are not supported (mm_processor_kwargs)")
        if chat_template_content_format not in ("auto", "string", "openai"):
            raise ValueError("chat_template_content_format must be 'auto', 'string' or 'openai'")
        if isinstance(messages, (list, tuple)) and messages and isinstance(messages[0], (list, tuple)):
            conversations = list(messages)
        else:
            conversations = [messages]
        prompts = []
        for conv in conversations:
            text = render_chat(engine, conv, tools, add_generation_prompt, continue_final_message, chat_template,
                               chat_template_kwargs)
            # The template wrote the special tokens (BOS included): none added again, as vLLM.
            prompts.append({"prompt_token_ids": engine.encode(text, False), "prompt": text})
        return self.generate(prompts, sampling_params, use_tqdm=use_tqdm)
