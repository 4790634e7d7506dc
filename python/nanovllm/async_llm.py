"""vLLM's AsyncLLM for Python servers: ``async for out in engine.generate(prompt, params, request_id)``
streams RequestOutputs (cumulative, deltas or the final one: SamplingParams.output_kind) and
``await engine.abort(request_id)`` ends a request. One engine thread owns the engine: it takes new
requests and aborts from a queue between steps, runs each step with the GIL released, and hands the
outputs to each request's asyncio queue with call_soon_threadsafe, so the event loop never waits
for a step."""
import asyncio
import collections
import threading

from nanovllm.llm import LLM
from nanovllm.llm_engine import _prompt, with_priority
from nanovllm.outputs import CompletionOutput, RequestOutput, cumulative_logprob, logprob_dicts
from nanovllm.sampling_params import RequestOutputKind, SamplingParams


class _Request:
    """A live request: its queue on the caller's event loop and what its choices produced so far."""

    def __init__(self, request_id, prompt_text, sp, loop):
        self.request_id, self.prompt_text, self.sp, self.loop = request_id, prompt_text, sp, loop
        self.queue = asyncio.Queue()
        self.engine_id = None
        self.prompt_token_ids = []
        self.prompt_logprobs = None
        n = sp.n
        self.text, self.tokens = [""] * n, [[] for _ in range(n)]
        self.logprobs = [[] if sp.logprobs is not None else None for _ in range(n)]
        self.finish, self.stop_reason = [None] * n, [None] * n
        self.sent_text, self.sent_tokens = [0] * n, [0] * n  # what DELTA outputs already gave

    def put(self, item):
        """To the caller's queue; False when its event loop has closed (nobody will read it)."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
            return True
        except RuntimeError:
            return False

    def output(self):
        delta = self.sp.output_kind == RequestOutputKind.DELTA
        outs = []
        for j in range(self.sp.n):
            t0, k0 = (self.sent_text[j], self.sent_tokens[j]) if delta else (0, 0)
            lps = self.logprobs[j]
            outs.append(CompletionOutput(index=j, text=self.text[j][t0:], token_ids=self.tokens[j][k0:],
                                         cumulative_logprob=cumulative_logprob(lps, self.tokens[j]),
                                         logprobs=lps[k0:] if lps is not None else None,
                                         finish_reason=self.finish[j], stop_reason=self.stop_reason[j]))
            if delta:
                self.sent_text[j], self.sent_tokens[j] = len(self.text[j]), len(self.tokens[j])
        finished = all(f is not None for f in self.finish)
        return RequestOutput(request_id=self.request_id, prompt=self.prompt_text,
                             prompt_token_ids=self.prompt_token_ids, prompt_logprobs=self.prompt_logprobs,
                             outputs=outs, finished=finished)


class AsyncLLM:
    """AsyncLLM(model, **LLM keywords). Use from one asyncio event loop or several; shutdown() (or
    the object going away) stops the engine thread."""

    def __init__(self, model, **kwargs):
        self._llm = LLM(model, **kwargs)
        self._commands = collections.deque()  # ("add", _Request, prompt, core params) | ("abort", request_id)
        self._wake = threading.Event()
        self._requests = {}  # request_id -> _Request (engine thread only)
        self._by_engine_id = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="nanovllm-engine", daemon=True)
        self._thread.start()

    async def generate(self, prompt, sampling_params: SamplingParams | None = None, request_id: str | None = None,
                       priority: int = 0, **kwargs):
        """Streams the RequestOutputs of one request until it finishes (or is aborted: the last output
        then has finish_reason "abort"). Closing the generator early aborts the request."""
        for k, v in kwargs.items():
            if v is not None:
                raise TypeError(f"generate() got an unsupported keyword argument {k!r}")
        if self._stopped:
            raise RuntimeError("this AsyncLLM has been shut down")
        if request_id is None:
            raise TypeError("generate() needs a request_id (a string, unique among live requests)")
        sp = sampling_params if sampling_params is not None else self._llm.get_default_sampling_params()
        engine_prompt, text = _prompt(prompt)
        core = with_priority(self._llm._core_params(sp), priority)  # a bad parameter raises here, in the caller
        req = _Request(str(request_id), text, sp, asyncio.get_running_loop())
        self._send(("add", req, engine_prompt, core))
        finished = False
        try:
            while True:
                item = await req.queue.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
                if finished:
                    return
        finally:
            if not finished:
                self._send(("abort", req.request_id))

    async def abort(self, request_id):
        """Ends a request (all its samples); its generator yields a last output with finish_reason "abort"."""
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        for rid in ids:
            self._send(("abort", str(rid)))

    async def get_tokenizer(self):
        return self._llm.get_tokenizer()

    def shutdown(self):
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass

    def _send(self, command):
        self._commands.append(command)
        self._wake.set()

    # --- the engine thread ---------------------------------------------------------------------

    def _run(self):
        engine = self._llm._engine
        while not self._stopped:
            while self._commands:
                self._command(engine, self._commands.popleft())
            if not engine.has_unfinished():
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                events = engine.step_events()
            except BaseException as e:  # the engine failed: every live request gets the error
                for req in list(self._requests.values()):
                    req.put(RuntimeError(f"engine step failed: {e}"))
                self._requests.clear()
                self._by_engine_id.clear()
                continue
            touched = {}
            for ev in events:
                req = self._by_engine_id.get(ev["request_id"])
                if req is not None and self._apply(req, ev):
                    touched[req.request_id] = req
            for req in touched.values():
                out_final = all(f is not None for f in req.finish)
                delivered = True
                if req.sp.output_kind != RequestOutputKind.FINAL_ONLY or out_final:
                    delivered = req.put(req.output())
                if not delivered and not out_final:  # its event loop is gone: nobody reads it
                    engine.abort_request(req.engine_id)
                if out_final or not delivered:
                    self._forget(req)

    def _command(self, engine, cmd):
        if cmd[0] == "add":
            _, req, prompt, core = cmd
            if req.request_id in self._requests:
                req.put(ValueError(f"request id {req.request_id!r} is already in use"))
                return
            try:
                req.engine_id, req.prompt_token_ids = engine.add_stream_request(prompt, core)
            except BaseException as e:
                req.put(e)
                return
            self._requests[req.request_id] = req
            self._by_engine_id[req.engine_id] = req
        else:
            req = self._requests.get(cmd[1])
            if req is None:
                return
            engine.abort_request(req.engine_id)
            req.finish = [f or "abort" for f in req.finish]
            req.put(req.output())
            self._forget(req)

    def _forget(self, req):
        self._requests.pop(req.request_id, None)
        self._by_engine_id.pop(req.engine_id, None)

    def _apply(self, req, ev):
        """One engine event into the request's state; False when it brings nothing to show."""
        j = ev["index"]
        if ev["error"]:
            req.put(RuntimeError(ev["error"]))
            self._forget(req)
            return False
        req.text[j] += ev["text"]
        req.tokens[j] += ev["token_ids"]
        if req.logprobs[j] is not None:
            req.logprobs[j] += logprob_dicts(ev["logprobs"])
        if ev["prompt_logprobs"]:
            tok = self._llm._engine.tokenizer()
            ids = req.prompt_token_ids
            req.prompt_logprobs = [None] + logprob_dicts(
                [[(ids[i + 1], lp, rank, _text(tok, ids[i + 1]))] +
                 [(t, v, k + 1, _text(tok, t)) for k, (t, v) in enumerate(top)]
                 for i, (lp, rank, top) in enumerate(ev["prompt_logprobs"])])
        if ev["finish_reason"]:
            req.finish[j] = ev["finish_reason"]
            final = ev["output"]  # the streamed deltas already add up to its text and tokens
            req.stop_reason[j] = final.get("stop_reason") if final else None
        return True


def _text(tok, token_id):
    return tok.decode([token_id], False) if tok is not None else ""
