// Server overhead benchmark (a program, not a test): one workload run offline through
// `nanovllm generate --input` and through `nanovllm serve` over loopback HTTP (all requests at
// once, non-streamed and streamed with the openai client), reporting output tok/s of each and
// the HTTP/offline ratio. Offline time excludes start-up (model + tokenizer load, measured by a
// one-token run and subtracted); server time runs from the first request to the last response.
//   node tests/e2e/server/bench_server.mjs [--num-seqs 32] [--hidden 64] [--layers 2] [--threads N] [--reps 2]
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, MODEL, startServer, writeTinyModel } from './harness.mjs';

const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? Number(process.argv[i + 1]) : dflt; };
const NUM = arg('num-seqs', 32); const REPS = arg('reps', 2); const HIDDEN = arg('hidden', 64); const LAYERS = arg('layers', 2);
const MIN_IN = 100, MAX_IN = arg('max-input-len', 300), MIN_OUT = 32, MAX_OUT = arg('max-output-len', 128);

// Deterministic workload (mulberry32): random prompt ids in [0, 10000], like bench.py.
function rng(seed) { return () => { seed |= 0; seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed); t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
const r = rng(0); const randint = (a, b) => a + Math.floor(r() * (b - a + 1));
const work = Array.from({ length: NUM }, (_, i) => ({
  prompt_token_ids: Array.from({ length: randint(MIN_IN, MAX_IN) }, () => randint(0, 10000)),
  max_tokens: randint(MIN_OUT, MAX_OUT), temperature: 0.6, ignore_eos: true, seed: i,
}));
const outputTokens = work.reduce((s, w) => s + w.max_tokens, 0);
const promptTokens = work.reduce((s, w) => s + w.prompt_token_ids.length, 0);

function resizeModel(dir) {
  const p = path.join(dir, 'config.json'); const c = JSON.parse(fs.readFileSync(p));
  // vocab = the tokenizer's 151669 (not Qwen3's padded 151936): offline generate cannot yet
  // detokenize the padding ids that random weights sample.
  Object.assign(c, { vocab_size: 151669, hidden_size: HIDDEN, intermediate_size: 2 * HIDDEN, num_hidden_layers: LAYERS });
  fs.writeFileSync(p, JSON.stringify(c));
}
const THREADS = arg('threads', 0);  // CPU backend threads for both runs (0 = the engine's default)
const EXTRA = THREADS ? ['--threads', String(THREADS)] : [];
const ENGINE = ['--load-format', 'dummy', '--device', 'cpu', '--kv-cache-memory', '400000000', ...EXTRA];

async function offline(dir) {
  const file = path.join(dir, 'work.jsonl');
  const one = path.join(dir, 'one.jsonl');
  fs.writeFileSync(file, work.map((w) => JSON.stringify(w)).join('\n') + '\n');
  fs.writeFileSync(one, JSON.stringify({ prompt_token_ids: [1, 2, 3], max_tokens: 1 }) + '\n');
  // Asynchronous, so that the event loop keeps the client's idle keep-alive sockets in order.
  const time = async (f) => { const t0 = performance.now(); await promisify(execFile)(BIN, ['generate', '--model', dir, ...ENGINE, '--input', f, '--json', '--no-progress'], { maxBuffer: 1 << 28 }); return (performance.now() - t0) / 1000; };
  const startup = Math.min(await time(one), await time(one));
  const total = await time(file);
  return total - startup;
}

async function http(s, stream) {
  const t0 = performance.now();
  let tokens = 0;
  await Promise.all(work.map(async (w) => {
    const { prompt_token_ids: prompt, ...rest } = w;
    if (!stream) {
      const o = await s.client.completions.create({ model: MODEL, prompt, ...rest });
      tokens += o.usage.completion_tokens;
      return;
    }
    const st = await s.client.completions.create({ model: MODEL, prompt, ...rest, stream: true, stream_options: { include_usage: true } });
    for await (const ch of st) if (ch.usage) tokens += ch.usage.completion_tokens;
  }));
  if (tokens !== outputTokens) throw new Error(`server generated ${tokens} tokens, expected ${outputTokens}`);
  return (performance.now() - t0) / 1000;
}

const dir = writeTinyModel();
resizeModel(dir);
// Alternate the three modes and keep each one's best time: the machine may be shared.
const best = { offline: Infinity, http: Infinity, stream: Infinity };
const srv = await startServer(EXTRA, { modelDir: dir, kvBytes: 400000000 });
try {
  await srv.client.completions.create({ model: MODEL, prompt: [1, 2, 3], max_tokens: 2 });  // warm-up
  for (let rep = 0; rep < REPS; ++rep) {
    best.offline = Math.min(best.offline, await offline(dir));
    best.http = Math.min(best.http, await http(srv, false));
    best.stream = Math.min(best.stream, await http(srv, true));
  }
} finally {
  await srv.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
const tps = (t) => outputTokens / t;
console.log(JSON.stringify({
  workload: { num_seqs: NUM, prompt_tokens: promptTokens, output_tokens: outputTokens, hidden_size: HIDDEN, layers: LAYERS, reps: REPS, threads: THREADS },
  offline_s: best.offline, http_s: best.http, http_stream_s: best.stream,
  offline_tok_s: tps(best.offline), http_tok_s: tps(best.http), http_stream_tok_s: tps(best.stream),
  ratio_http: best.offline / best.http, ratio_http_stream: best.offline / best.stream,
}, null, 1));
