#!/usr/bin/env python3
"""A soak of `nanovllm serve` (issue 44): mixed traffic at a steady rate for a while, watching the server's
memory and KV cache. Standard library only (runs on the GPU box); not part of CI.

    python3 scripts/soak_server.py --base http://127.0.0.1:18000 --pid PID --minutes 30 [--rate 8]
        [--model qwen3-0.6b] [--short 32,256] [--long 2000,8000] [--vocab 10000]

Each request is drawn at random: 55% short streamed completions, 10% long prompts, 10% streams the client
abandons after a few chunks (the server must abort them and free their KV), 10% n=4 with logprobs=5, 10%
prompt_logprobs=2 (non-streamed), 5% chat with a stop string. Every 30 s one JSON line: the server's RSS
(/proc/PID/status VmRSS, when --pid is given), the KV cache usage, running and waiting gauges from /metrics,
requests sent / ok / failed. At the end the traffic stops, the server drains, and a last line reports the KV
usage (0 once idle) and the RSS growth over the second half of the soak (flat = a bounded cache, no leak).
"""
import argparse
import http.client
import json
import random
import threading
import time
import urllib.parse
import urllib.request


def rss_mib(pid):
    if not pid:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def gauges(base):
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        for name in ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting"):
            if line.startswith("vllm:" + name):
                out[name] = float(line.rsplit(" ", 1)[1])
    return out


class Traffic:
    def __init__(self, args):
        self.args = args
        u = urllib.parse.urlparse(args.base)
        self.host, self.port = u.hostname, u.port
        self.lock = threading.Lock()
        self.sent = self.ok = self.failed = self.abandoned = 0

    def prompt(self, rng, lo_hi):
        lo, hi = lo_hi
        return [rng.randint(1, self.args.vocab - 1) for _ in range(rng.randint(lo, hi))]

    def one(self, seed):
        rng = random.Random(seed)
        a = self.args
        kind = rng.random()
        body = {"model": a.model, "temperature": 0.8, "ignore_eos": True}
        route, stream, abandon = "/v1/completions", False, False
        if kind < 0.55:
            body.update(prompt=self.prompt(rng, a.short), max_tokens=rng.randint(16, 128), stream=True)
            stream = True
        elif kind < 0.65:
            body.update(prompt=self.prompt(rng, a.long), max_tokens=32)
        elif kind < 0.75:
            body.update(prompt=self.prompt(rng, a.short), max_tokens=512, stream=True)
            stream = abandon = True
        elif kind < 0.85:
            body.update(prompt=self.prompt(rng, a.short), max_tokens=48, n=4, logprobs=5)
        elif kind < 0.95:
            body.update(prompt=self.prompt(rng, a.short), max_tokens=8, prompt_logprobs=2)
        else:
            route = "/v1/chat/completions"
            body = {"model": a.model, "messages": [{"role": "user", "content": "tell me a story " * rng.randint(1, 50)}],
                    "max_tokens": 64, "stop": ["the end", "\n\n\n"], "stream": True}
            stream = True
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            conn.request("POST", route, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                r.read()
                raise RuntimeError(f"HTTP {r.status}")
            if abandon:
                for _ in range(3):
                    r.readline()
                with self.lock:
                    self.abandoned += 1
                return  # the connection closes with chunks unread: the server aborts the request
            data = r.read()
            if stream and b"[DONE]" not in data:
                raise RuntimeError("stream without [DONE]")
            with self.lock:
                self.ok += 1
        except Exception:
            with self.lock:
                self.failed += 1
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=float, default=8, help="requests per second")
    ap.add_argument("--short", default="32,256")
    ap.add_argument("--long", default="2000,8000")
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--report-every", type=float, default=30)
    args = ap.parse_args()
    args.short = tuple(int(x) for x in args.short.split(","))
    args.long = tuple(int(x) for x in args.long.split(","))
    t = Traffic(args)
    t0 = time.time()
    end = t0 + args.minutes * 60
    next_report, seq, threads, samples = t0, 0, [], []

    def report(phase):
        g = gauges(args.base)
        line = {"phase": phase, "t_s": round(time.time() - t0, 1), "rss_mib": rss_mib(args.pid), **g,
                "sent": t.sent, "ok": t.ok, "failed": t.failed, "abandoned": t.abandoned}
        samples.append(line)
        print(json.dumps(line), flush=True)

    while time.time() < end:
        now = time.time()
        if now >= next_report:
            report("traffic")
            next_report += args.report_every
        th = threading.Thread(target=t.one, args=(seq,), daemon=True)
        th.start()
        threads.append(th)
        seq += 1
        t.sent += 1
        threads = [x for x in threads if x.is_alive()]
        time.sleep(random.expovariate(args.rate))
    for th in threads:
        th.join(timeout=600)
    time.sleep(2)
    report("drained")
    traffic = [s for s in samples if s["phase"] == "traffic" and s["rss_mib"] is not None]
    half = traffic[len(traffic) // 2:] if traffic else []
    summary = {"summary": True, "minutes": args.minutes, "rate": args.rate, "sent": t.sent, "ok": t.ok,
               "failed": t.failed, "abandoned": t.abandoned, "kv_cache_usage_perc_end": samples[-1].get("kv_cache_usage_perc"),
               "running_end": samples[-1].get("num_requests_running")}
    if half:
        summary["rss_mib_second_half"] = [half[0]["rss_mib"], max(s["rss_mib"] for s in half), samples[-1]["rss_mib"]]
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
