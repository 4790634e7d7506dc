// A JSON fuzz run against the live server: for NANOVLLM_FUZZ_SECONDS (default 20; bench/RESULTS.md
// records a 5-minute run) 16 clients send mutations of valid and invalid request bodies (values of
// every type swapped in, keys dropped and added, deep nesting, huge numbers, byte flips,
// truncation, odd content types and methods), some streamed and abandoned mid-way. Every answer
// must be a 2xx or a 4xx with an OpenAI-style error (never a 5xx or a dropped connection), the
// server stays up, and afterwards nothing runs and no KV block is held.
import { MODEL, check, metrics, run, startServer } from './harness.mjs';

const SECONDS = Number(process.env.NANOVLLM_FUZZ_SECONDS ?? 20);
const SEED = Number(process.env.NANOVLLM_FUZZ_SEED ?? 1);
const CLIENTS = 16;

function rng(seed) {  // mulberry32: the run is reproducible from its seed
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEEDS = [
  ['/v1/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 0.7, top_p: 0.9, top_k: 20, seed: 1 }],
  ['/v1/completions', { prompt: [1, 2, 3], max_tokens: 4, stream: true, stream_options: { include_usage: true }, stop: ['\n'] }],
  ['/v1/completions', { prompt: ['a', 'b'], max_tokens: 3, stop_token_ids: [5], ignore_eos: true, min_p: 0.1 }],
  ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], max_completion_tokens: 6 }],
  ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }] }], stream: true, chat_template_kwargs: { enable_thinking: false }, max_tokens: 5 }],
  ['/v1/chat/completions', { messages: [{ role: 'user', content: 'weather?' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], max_tokens: 4 }],
  ['/tokenize', { prompt: 'Hello world' }],
  ['/tokenize', { messages: [{ role: 'user', content: 'Hi' }] }],
  ['/detokenize', { tokens: [9707, 1879] }],
];

function randomValue(r, depth = 0) {
  const k = Math.floor(r() * 14);
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return Math.floor(r() * 2 ** 31) - 2 ** 30;
    case 3: return ['__NUM1e400__', '__NUM-1e400__', '__NUM18446744073709551616__', '__NUM18446744073709551615__',
      '__NUM9223372036854775808__', '__NUM-9223372036854775809__', 1e-320, 0.5][Math.floor(r() * 8)];  // raw numbers JSON.stringify cannot write
    case 4: return 'x'.repeat(Math.floor(r() * 40));
    case 5: return String.fromCodePoint(...Array.from({ length: 8 }, () => Math.floor(r() * 0x10ffff) & ~0x800));
    case 6: return depth > 3 ? [] : Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
    case 7: return depth > 3 ? {} : Object.fromEntries(Array.from({ length: Math.floor(r() * 3) }, (_, i) => [`k${i}`, randomValue(r, depth + 1)]));
    case 8: {  // nesting around the server's limit of 256 levels
      let v = [];
      for (let d = 200 + Math.floor(r() * 100); d > 0; d--) v = [v];
      return v;
    }
    case 9: return Array.from({ length: Math.floor(r() * 20) }, () => Math.floor(r() * 300000) - 1000);
    case 10: return [{ type: ['text', 5, null, {}][Math.floor(r() * 4)], text: randomValue(r, depth + 1) }];
    case 11: return [{ role: randomValue(r, 3), content: randomValue(r, 3) }];
    case 12: return 'stop';
    default: return Math.floor(r() * 5000);
  }
}

const KEYS = ['prompt', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'n', 'stop',
  'stop_token_ids', 'stream', 'stream_options', 'ignore_eos', 'model', 'tools', 'chat_template_kwargs', 'tokens', 'logprobs', 'echo', 'best_of'];

// One request: a JSON body mutated structurally or at the byte level, with headers.
function mutate(r) {
  const [path, base] = SEEDS[Math.floor(r() * SEEDS.length)];
  const body = structuredClone(base);
  for (let i = Math.floor(r() * 4); i > 0; i--) {
    const key = r() < 0.7 ? Object.keys(body)[Math.floor(r() * Object.keys(body).length)] ?? 'prompt' : KEYS[Math.floor(r() * KEYS.length)];
    if (r() < 0.2) delete body[key];
    else body[key] = randomValue(r);
  }
  if (typeof body.max_tokens === 'number' && body.max_tokens > 64 && r() < 0.9) body.max_tokens = 64;  // keep the engine moving
  let text = JSON.stringify(body).replace(/"__NUM([-0-9e]+)__"/g, '$1');
  const m = r();
  if (m < 0.1) text = text.slice(0, Math.floor(r() * text.length));
  else if (m < 0.2) {
    const b = Buffer.from(text);
    for (let i = 0; i < 1 + r() * 4; i++) b[Math.floor(r() * b.length)] = Math.floor(r() * 256);
    text = b;
  } else if (m < 0.25) text = `{"prompt": "x", "junk": ${'['.repeat(300 + Math.floor(r() * 3000))}${']'.repeat(300)}}`;
  const ct = r() < 0.9 ? 'application/json' : ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=utf-8', ''][Math.floor(r() * 4)];
  const method = r() < 0.97 ? 'POST' : ['GET', 'PUT', 'DELETE'][Math.floor(r() * 3)];
  return { path, text, ct, method, abandon: r() < 0.1 };
}

const ALLOWED = new Set([200, 400, 404, 405, 408, 413, 415]);

run(async () => {
  const s = await startServer(['--request-timeout', '10', '--max-body-bytes', '1000000']);
  const counts = {};
  let requests = 0;
  try {
    const deadline = Date.now() + SECONDS * 1000;
    await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
      const r = rng(SEED * 1000 + c);
      while (Date.now() < deadline) {
        const q = mutate(r);
        const ac = new AbortController();
        const headers = q.ct ? { 'content-type': q.ct } : {};
        let res;
        try {
          res = await fetch(s.base + q.path, { method: q.method, headers, body: q.method === 'GET' ? undefined : q.text, signal: ac.signal });
        } catch (e) {
          throw new Error(`FAIL: ${q.method} ${q.path} got no answer (${e.cause?.code ?? e}): ${String(q.text).slice(0, 300)}`);
        }
        requests++;
        counts[res.status] = (counts[res.status] ?? 0) + 1;
        check(ALLOWED.has(res.status), `${q.method} ${q.path} answered ${res.status}: ${String(q.text).slice(0, 300)}`);
        if (q.abandon && res.status === 200) { ac.abort(); continue; }
        const body = await res.text();
        if (res.status !== 200) {
          let j = null;
          try { j = JSON.parse(body); } catch {}
          check(j?.error && typeof j.error.message === 'string', `${res.status} has an OpenAI-style error: ${body.slice(0, 200)}`);
        }
      }
    }));
    check(s.alive(), 'server alive after the fuzz run');
    // Everything abandoned or finished: the engine drains to idle.
    const until = Date.now() + 15000;
    let m;
    for (;;) {
      m = await metrics(s.base);
      const busy = [m['vllm:num_requests_running'], m['vllm:num_requests_waiting'], m['nanovllm:num_requests_open'], m['nanovllm:kv_cache_blocks_used']];
      if (busy.every((x) => x === 0)) break;
      check(Date.now() < until, `idle after the run: running, waiting, open, KV blocks = ${busy}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    check((await fetch(`${s.base}/health`)).status === 200, 'healthy');
    console.log(`${requests} fuzzed requests in ${SECONDS} s from ${CLIENTS} clients (seed ${SEED}); statuses ${JSON.stringify(counts)}; idle afterwards`);
  } finally {
    await s.stop();
  }
}, (SECONDS + 90) * 1000);
