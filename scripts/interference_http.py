#!/usr/bin/env python3
"""Issue 44's interference scenario through `nanovllm serve` over HTTP (standard library only, for the GPU box).

    python3 scripts/interference_http.py --base http://127.0.0.1:18000 [--streams 64] [--context 1024]
        [--prompt-len 32000] [--model qwen3-8b] [--vocab 10000] [--stream-tokens 2000]

A long prompt alone first (a warm-up, discarded), then another alone (its TTFT "alone"); then `--streams` greedy
streams of `--context`-token prompts decode (ignore_eos) and, once every stream has 16 tokens, one `--prompt-len`-token
prompt arrives. ITL = every gap between two SSE chunks of a stream from the long prompt's arrival to its first token
(the streams' latency while it is read). Prompts are random token ids, distinct each time (no prefix-cache hits).
Prints one JSON line: ITL median / p90 / p99 / max (ms), the long prompt's TTFT with streams and alone, the ratio.
"""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse


def post_stream(base, body):
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]}")
    return conn, r


def ttft(base, model, prompt):
    t0 = time.perf_counter()
    conn, r = post_stream(base, {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": True})
    while True:
        line = r.readline()
        if not line or line.startswith(b"data: {"):
            break
    t = time.perf_counter() - t0
    r.read()
    conn.close()
    return t


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--prompt-len", type=int, default=32000)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--stream-tokens", type=int, default=2000, help="max_tokens of each stream")
    args = ap.parse_args()
    rng = random.Random(0)
    rand = lambda n: [rng.randint(1, args.vocab - 1) for _ in range(n)]
    ttft(args.base, args.model, rand(args.prompt_len))  # warm-up
    alone = ttft(args.base, args.model, rand(args.prompt_len))

    stamps = [[] for _ in range(args.streams)]
    stop = threading.Event()

    def stream(i, prompt):
        conn, r = post_stream(args.base, {"model": args.model, "prompt": prompt, "max_tokens": args.stream_tokens, "temperature": 0,
                                          "ignore_eos": True, "stream": True})
        try:
            while not stop.is_set():
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: {"):
                    stamps[i].append(time.perf_counter())
        finally:
            conn.close()

    prompts = [rand(args.context) for _ in range(args.streams)]
    threads = [threading.Thread(target=stream, args=(i, p), daemon=True) for i, p in enumerate(prompts)]
    for t in threads:
        t.start()
    while min(len(s) for s in stamps) < 16:
        time.sleep(0.01)
    arrival = time.perf_counter()
    with_streams = ttft(args.base, args.model, rand(args.prompt_len))
    first = arrival + with_streams
    time.sleep(0.2)
    stop.set()
    gaps = []
    for s in stamps:
        inside = [t for t in s if arrival <= t <= first]
        before = [t for t in s if t < arrival]
        after = [t for t in s if t > first]
        seq = ([before[-1]] if before else []) + inside + ([after[0]] if after else [])
        gaps += [(b - a) * 1e3 for a, b in zip(seq, seq[1:])]
    print(json.dumps({"mode": "interference_http", "streams": args.streams, "context": args.context,
                      "prompt_len": args.prompt_len, "itl_samples": len(gaps),
                      "median_itl_ms": percentile(gaps, 0.5), "p90_itl_ms": percentile(gaps, 0.9),
                      "p99_itl_ms": percentile(gaps, 0.99), "max_itl_ms": max(gaps),
                      "ttft_with_streams_ms": with_streams * 1e3, "ttft_alone_ms": alone * 1e3,
                      "ttft_ratio": with_streams / alone}), flush=True)


if __name__ == "__main__":
    main()
