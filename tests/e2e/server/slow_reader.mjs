// Slow readers (issue 44): a streamed request with n = 64 and a 48 KB request id (above the default
// --max-request-id-length, raised here to show the bound holds for long ids) whose client
// reads nothing for a while. Output waits merged per choice (one event per choice, not one per
// token each repeating the id), so the server's RSS stays within a fixed bound and the stream
// completes when the reader resumes; with a small --max-pending-output-bytes the request is
// aborted instead (its KV blocks freed, a log line, the connection closed).
import fs from 'node:fs';
import net from 'node:net';
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssMiB = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)[1]) / 1024;
const N = 64, ID = 'r'.repeat(49152);
// The reader must resume within --keep-alive-timeout (the write timeout): 60 s here.
// The bound on the server's growth while the reader stalls: what waits is one merged event per
// choice (text, token ids, logprobs: well under 1 MiB here) and one SSE write of 64 chunks that
// each carry the 48 KB id (~3 MiB), plus allocator slack. Repeating the id per token and choice
// as before costs 64 x MAX_TOKENS x 48 KB = 96 MiB at this size.
const GROWTH_MIB = 40, MAX_TOKENS = 32;

// A streamed completion on a raw socket that is paused (reads nothing) from the start.
function stalledStream(port, extra = {}) {
  const body = JSON.stringify({ model: MODEL, prompt: 'Hello', n: N, max_tokens: MAX_TOKENS, temperature: 1, seed: 1, ignore_eos: true, stream: true, ...extra });
  const sock = net.connect(port, '127.0.0.1');
  const c = { sock, bytes: 0, text: '', closed: false };
  sock.on('connect', () => {
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: ${ID}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    sock.pause();
  });
  sock.on('data', (d) => { c.bytes += d.length; c.text += d.toString('latin1').replaceAll(ID, 'ID'); });
  sock.on('error', () => {});
  sock.on('close', () => { c.closed = true; });
  return c;
}

run(async () => {
  {
    const s = await startServer(['--keep-alive-timeout', '60', '--max-request-id-length', '65536']);
    try {
      // Warm-up with the same shape (64 rows of logits, KV blocks touched), read at once: the
      // engine's own memory for this batch is in the baseline.
      await s.client.completions.create({ model: MODEL, prompt: 'Hello', n: N, max_tokens: MAX_TOKENS, ignore_eos: true });
      const base = rssMiB(s.proc.pid);
      const c = stalledStream(s.port);
      let peak = base;
      const t0 = Date.now();
      // Reads nothing for 6 s (tokens keep coming: the reader is too slow, not gone).
      while (Date.now() - t0 < 6000) {
        await sleep(200);
        peak = Math.max(peak, rssMiB(s.proc.pid));
      }
      c.sock.resume();
      for (let i = 0; i < 600 && !/data: \[DONE\]/.test(c.text); i++) {
        await sleep(100);
        peak = Math.max(peak, rssMiB(s.proc.pid));
      }
      check(/data: \[DONE\]/.test(c.text), `the stream completes once the reader resumes (paused ${Date.now() - t0} ms, closed ${c.closed}, ${c.bytes} bytes)`);
      const finishes = new Set([...c.text.matchAll(/"index":(\d+),[^\n]*"finish_reason":"length"/g)].map((m) => m[1]));
      eq(finishes.size, N, 'every choice finished');
      check(peak - base < GROWTH_MIB, `RSS grew ${(peak - base).toFixed(1)} MiB (bound ${GROWTH_MIB}) over ${base.toFixed(0)} MiB`);
      const chunks = (c.text.match(/^data: \{/gm) ?? []).length;
      check(chunks < N * MAX_TOKENS / 4, `deltas merged per choice while the reader stalled (${chunks} chunks for ${N * MAX_TOKENS} tokens)`);
      c.sock.destroy();
    } finally {
      await s.stop();
    }
  }
  {
    const s = await startServer(['--max-pending-output-bytes', '65536', '--max-request-id-length', '65536']);
    try {
      const before = await metrics(s.base);
      const c = stalledStream(s.port, { logprobs: 5, max_tokens: 4000 });
      const t0 = Date.now();
      while (!/read too slowly/.test(s.log())) {
        check(Date.now() - t0 < 30000, `the request is aborted within 30 s:\n${s.log()}`);
        await sleep(100);
      }
      check(s.log().includes('...('), 'the logged request id is cut');
      await sleep(300);
      const m = await metrics(s.base);
      eq(m['vllm:num_requests_running'], 0, 'aborted: nothing running');
      eq(m['vllm:kv_cache_usage_perc'], 0, 'aborted: KV blocks freed');
      const aborted = (await (await fetch(`${s.base}/metrics`)).text()).match(/request_success_total\{[^}]*finished_reason="abort"\} (\d+)/);
      eq(Number(aborted[1]), N, 'the 64 choices are counted as aborted');
      check(before['vllm:num_requests_running'] === 0, 'idle before');
      c.sock.resume();
      for (let i = 0; i < 50 && !c.closed; i++) await sleep(100);
      check(c.closed, 'the server closed the connection');
      check(!/data: \[DONE\]/.test(c.text), 'the cut stream has no [DONE]');
      eq((await fetch(`${s.base}/health`)).status, 200, 'the server stays healthy');
    } finally {
      await s.stop();
    }
  }
}, 230000);
