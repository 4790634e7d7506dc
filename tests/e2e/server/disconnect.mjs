// Cancellation: clients that drop mid-stream or while a non-streamed request runs (the openai
// client's abort, and raw sockets destroyed without a word) leave no running request and no held
// KV blocks; a request
// running past --request-timeout gets a 408 and is aborted too. The server keeps serving. The
// server runs with --async-scheduling (CUDA's default, off on the CPU otherwise): aborts land while
// a step ahead holds the aborted rows.
import net from 'node:net';
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

const LONG = { model: MODEL, max_tokens: 3000, ignore_eos: true, temperature: 0.8 };

async function untilIdle(base, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const m = await metrics(base);
    const busy = [m['vllm:num_requests_running'], m['vllm:num_requests_waiting'], m['nanovllm:num_requests_open'], m['nanovllm:kv_cache_blocks_used']];
    if (busy.every((x) => x === 0)) return m;
    if (Date.now() > deadline) throw new Error(`FAIL: not idle after ${ms} ms: running, waiting, open, kv blocks = ${busy}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// A raw HTTP client that reads until it has `bytes` of the response (or `ms` pass), then
// destroys the socket.
function rawDrop(port, body, bytes, ms = 60000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const payload = JSON.stringify(body);
    let got = 0;
    sock.on('connect', () => sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`));
    setTimeout(() => { sock.destroy(); resolve(got); }, ms);
    sock.on('data', (d) => { got += d.length; if (got >= bytes) { sock.destroy(); resolve(got); } });
    sock.on('error', reject);
    sock.on('close', () => resolve(got));
  });
}

run(async () => {
  const s = await startServer(['--request-timeout', '2', '--async-scheduling']);
  const c = s.client;
  try {
    // 12 openai-client streams that stop reading after a few chunks (abort the HTTP request).
    const dropped = await Promise.all(Array.from({ length: 12 }, async (_, i) => {
      const ac = new AbortController();
      const stream = await c.completions.create({ ...LONG, prompt: `Story ${i}:`, seed: i, stream: true }, { signal: ac.signal });
      let n = 0;
      try {
        for await (const ch of stream) { if (++n === 5 + i) { ac.abort(); } }
      } catch (e) {
        if (!(e.name === 'AbortError' || /abort/i.test(String(e)))) throw e;
      }
      return n;
    }));
    check(dropped.every((n, i) => n >= 5 + i), 'the dropped clients got their chunks first');
    // 12 raw sockets that vanish mid-stream.
    const got = await Promise.all(Array.from({ length: 12 }, (_, i) => rawDrop(s.port, { ...LONG, prompt: `Raw ${i}`, seed: i, stream: true }, 2000)));
    check(got.every((n) => n >= 2000), 'raw clients read part of the stream before dropping');
    let m = await untilIdle(s.base);
    check(m['vllm:generation_tokens_total'] < 24 * 3000 / 2, `aborted requests stopped generating (${m['vllm:generation_tokens_total']} tokens)`);
    eq(m['vllm:kv_cache_usage_perc'], 0, 'KV usage back to 0 after disconnects');

    // Non-streaming clients that vanish while their request runs (or waits) are aborted too:
    // 8 openai-client requests aborted after 300 ms, 8 raw sockets destroyed after 300 ms.
    const before = m['vllm:generation_tokens_total'];
    await Promise.all(Array.from({ length: 8 }, async (_, i) => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 300);
      try {
        await c.completions.create({ ...LONG, prompt: `Whole ${i}:`, seed: 100 + i }, { signal: ac.signal });
        throw new Error('FAIL: the aborted non-streaming request completed');
      } catch (e) {
        if (!(e.name === 'AbortError' || /abort/i.test(String(e)))) throw e;
      }
    }));
    await Promise.all(Array.from({ length: 8 }, (_, i) => rawDrop(s.port, { ...LONG, prompt: `Raw whole ${i}` , seed: 200 + i }, 1, 300)));
    const t1 = Date.now();
    m = await untilIdle(s.base, 3000);
    const made = m['vllm:generation_tokens_total'] - before;
    check(made < 16 * 3000 / 4, `non-streaming requests stopped when their clients left (${made} tokens, idle after ${Date.now() - t1} ms)`);

    // Timeout: a non-streamed request that would outlive --request-timeout 2 gets a 408.
    const t0 = Date.now();
    let status = 0; let err = null;
    try {
      await c.completions.create({ ...LONG, max_tokens: 4000, prompt: 'forever', seed: 1 });
    } catch (e) { status = e.status; err = e.error; }
    eq(status, 408, 'timeout status');
    eq(err?.code, 408, 'timeout error code (the status, as vLLM)');
    check(Date.now() - t0 < 6000, 'timed out promptly');
    // A streamed one gets an error event and the stream ends.
    let sawError = false;
    try {
      const st = await c.completions.create({ ...LONG, max_tokens: 4000, prompt: 'forever', seed: 2, stream: true });
      for await (const ch of st) { void ch; }
    } catch (e) { sawError = /longer than/.test(String(e.message ?? e)); }
    check(sawError, 'streamed timeout ends with an error event');
    m = await untilIdle(s.base);

    // Still serving, correctly.
    const ok = await c.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0 });
    eq(ok.usage.completion_tokens, 5, 'server still serves after disconnects');
    await untilIdle(s.base);
    check(s.alive(), 'server alive');
  } finally {
    await s.stop();
  }
});
