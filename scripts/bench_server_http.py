#!/usr/bin/env python3
"""bench.py's workload through `nanovllm serve` over HTTP (standard library only, for the GPU box).

    python3 scripts/bench_server_http.py --base http://127.0.0.1:18000 [--num-seqs 256] [--stream]

Sends the 256 requests of nano-vllm's bench.py (random.seed(0); token-id prompts; temperature 0.6,
ignore_eos, max_tokens randint(100, 1024)) concurrently to /v1/completions and prints one JSON line:
output tokens, seconds, output tok/s. Compare with `nanovllm bench` on the same model and flags.
--stream: every request streams (SSE, one event per token or merged deltas, usage in the last).
"""
import argparse
import json
import threading
import time
import urllib.request
from random import randint, seed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--num-seqs", type=int, default=256)
    ap.add_argument("--stream", action="store_true")
    args = ap.parse_args()
    seed(0)
    prompts = [[randint(0, 10000) for _ in range(randint(100, 1024))] for _ in range(args.num_seqs)]
    max_tokens = [randint(100, 1024) for _ in range(args.num_seqs)]
    # Warm-up request, as bench.py does.
    post(args, [1, 2, 3], 4)
    results = [None] * args.num_seqs
    def worker(i):
        results[i] = post(args, prompts[i], max_tokens[i])
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.num_seqs)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    out = sum(r["usage"]["completion_tokens"] for r in results)
    assert out == sum(max_tokens), (out, sum(max_tokens))
    print(json.dumps({"mode": "http-stream" if args.stream else "http", "num_seqs": args.num_seqs, "prompt_tokens": sum(map(len, prompts)),
                      "output_tokens": out, "seconds": secs, "output_tok_s": out / secs}))


def post(args, prompt, max_tokens):
    fields = {"model": args.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.6, "ignore_eos": True}
    if args.stream:
        fields.update(stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(args.base + "/v1/completions", data=json.dumps(fields).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        if not args.stream:
            return json.loads(r.read())
        usage = None
        for line in r:  # "data: {...}" events, "data: [DONE]" last
            if line.startswith(b"data: {"):
                event = json.loads(line[6:])
                usage = event.get("usage") or usage
        return {"usage": usage}


if __name__ == "__main__":
    main()
