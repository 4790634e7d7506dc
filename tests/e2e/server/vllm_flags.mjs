// vLLM's command line and the server features around it (issue 19): the Qwen3 command line from
// vLLM's docs starts, /version, /v1/models/{id}, CORS preflight, --root-path, --response-role,
// VLLM_API_KEY, generation_config.json defaults (and --generation-config vllm with
// --override-generation-config), request logs, the start-up summary, the stats line, and the
// new Prometheus series after a request.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, MODEL, OpenAI, check, eq, metrics, run, startServer, writeTinyModel } from './harness.mjs';

const ORIGIN = 'https://app.example';

async function vllmCommandLine() {
  const dir = writeTinyModel({ maxPositions: 40960 });
  // Greedy by default through the model's generation config; max_new_tokens caps requests without max_tokens.
  fs.writeFileSync(path.join(dir, 'generation_config.json'),
    JSON.stringify({ temperature: 0.0, max_new_tokens: 5, eos_token_id: [151645, 151643], do_sample: false }));
  const s = await startServer([
    '--dtype', 'auto', '--max-model-len', '8192', '-tp', '1', '--seed', '0',
    '--reasoning-parser', 'qwen3', '--enable-auto-tool-choice', '--tool-call-parser', 'hermes',
    '--trust-remote-code', '--kv-cache-dtype', 'auto', '--uvicorn-log-level', 'info',
    '--allowed-origins', JSON.stringify([ORIGIN]), '--allowed-methods', '["GET", "POST"]',
    '--root-path', '/api', '--response-role', 'bot', '--enable-log-requests', '--log-stats-interval', '0.5',
  ], { modelDir: dir, positional: true });
  try {
    // Metrics right from start-up: the KV pool and the cache config.
    let m = await metrics(s.base);
    check(m['nanovllm:kv_cache_blocks_total'] > 0, 'kv_cache_blocks_total known before any request');
    const text0 = await (await fetch(`${s.base}/metrics`)).text();
    const info = text0.match(/^vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"[^}]*\} 1$/m);
    check(info && Number(info[1]) === m['nanovllm:kv_cache_blocks_total'], `cache_config_info: ${info}`);

    // The answer, with the model's defaults: greedy (identical twice), 5 tokens.
    const ask = (extra = {}) => s.client.completions.create({ model: MODEL, prompt: 'Hello there', ...extra });
    const a = await ask(), b = await ask();
    eq(a.usage.completion_tokens, 5, 'max_new_tokens of generation_config.json is the default max_tokens');
    eq(a.choices[0].text, b.choices[0].text, 'temperature 0 of generation_config.json: deterministic');
    // Per-request fields win: max_tokens, and temperature (two samples at 1.5 differ).
    const hot = { temperature: 1.5, max_tokens: 24, ignore_eos: true };
    const c = await ask(hot), d = await ask(hot);
    eq(c.usage.completion_tokens, 24, 'request max_tokens wins over max_new_tokens');
    check(c.choices[0].text !== d.choices[0].text, 'request temperature wins over the generation config');

    // Chat with the response role.
    const chat = await s.client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    eq(chat.choices[0].message.role, 'bot', '--response-role');
    const stream = await s.client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true });
    let role = null;
    for await (const ch of stream) role ??= ch.choices[0]?.delta?.role ?? null;
    eq(role, 'bot', '--response-role in the stream');

    // /version, equal to `nanovllm --version`.
    const version = execFileSync(BIN, ['--version']).toString().trim();
    eq(await (await fetch(`${s.base}/version`)).json(), { version }, '/version');
    // /v1/models/{id}, through the client and raw.
    const card = await s.client.models.retrieve(MODEL);
    eq([card.id, card.object], [MODEL, 'model'], '/v1/models/{id}');
    let err = null;
    try { await s.client.models.retrieve('no-such-model'); } catch (e) { err = e; }
    check(err instanceof OpenAI.NotFoundError, `/v1/models/{unknown}: NotFoundError, got ${err}`);
    const nf = await fetch(`${s.base}/v1/models/no-such-model`);
    const nfBody = await nf.json();
    eq([nf.status, nfBody.error.code, nfBody.error.type], [404, 404, 'NotFoundError'], '/v1/models/{unknown} is an OpenAI 404');

    // --root-path: the prefixed routes answer too.
    eq((await (await fetch(`${s.base}/api/v1/models`)).json()).data[0].id, MODEL, '--root-path /api/v1/models');
    eq((await fetch(`${s.base}/api/version`)).status, 200, '--root-path /api/version');
    eq((await fetch(`${s.base}/apiv1/models`)).status, 404, '--root-path matches whole segments');

    // CORS: preflight, an allowed and a foreign origin.
    const pre = await fetch(`${s.base}/v1/chat/completions`, { method: 'OPTIONS', headers: {
      Origin: ORIGIN, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
    eq(pre.status, 200, 'CORS preflight');
    eq(pre.headers.get('access-control-allow-origin'), ORIGIN, 'preflight allow-origin');
    check(/POST/.test(pre.headers.get('access-control-allow-methods') ?? ''), 'preflight allow-methods');
    eq(pre.headers.get('access-control-allow-headers'), 'authorization, content-type', 'preflight allow-headers');
    const badPre = await fetch(`${s.base}/v1/chat/completions`, { method: 'OPTIONS', headers: {
      Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST' } });
    eq(badPre.status, 400, 'preflight from a foreign origin');
    const badMethod = await fetch(`${s.base}/v1/models`, { method: 'OPTIONS', headers: {
      Origin: ORIGIN, 'Access-Control-Request-Method': 'DELETE' } });
    eq(badMethod.status, 400, 'preflight for a method outside --allowed-methods');
    const simple = await fetch(`${s.base}/v1/models`, { headers: { Origin: ORIGIN } });
    eq(simple.headers.get('access-control-allow-origin'), ORIGIN, 'allow-origin on a simple request');
    eq((await fetch(`${s.base}/v1/models`, { headers: { Origin: 'https://evil.example' } })).headers.get('access-control-allow-origin'),
      null, 'no allow-origin for a foreign origin');
    eq((await fetch(`${s.base}/v1/models`)).headers.get('access-control-allow-origin'), null, 'no CORS without Origin');

    // The new metrics, with sane values: 6 requests so far (a, b, c, d, chat, stream).
    await new Promise((r) => setTimeout(r, 1200));  // a stats line is due every 0.5 s while busy
    m = await metrics(s.base);
    eq(m['vllm:request_prompt_tokens_count'], 6, 'request_prompt_tokens count');
    eq(m['vllm:request_prompt_tokens_sum'], m['vllm:prompt_tokens_total'], 'request_prompt_tokens sum = prompt_tokens_total');
    eq(m['vllm:request_generation_tokens_sum'], m['vllm:generation_tokens_total'], 'request_generation_tokens sum');
    for (const h of ['queue_time', 'prefill_time', 'decode_time']) {
      eq(m[`vllm:request_${h}_seconds_count`], 6, `request_${h}_seconds count`);
      check(m[`vllm:request_${h}_seconds_sum`] >= 0 && m[`vllm:request_${h}_seconds_sum`] <= m['vllm:e2e_request_latency_seconds_sum'],
        `request_${h}_seconds sum within e2e: ${m[`vllm:request_${h}_seconds_sum`]}`);
    }
    check(m['vllm:request_decode_time_seconds_sum'] > 0, 'decode time measured');
    check(m['vllm:iteration_tokens_total_count'] >= 5 + 5 + 24 + 24, `iteration_tokens_total count ${m['vllm:iteration_tokens_total_count']}`);
    check(m['vllm:iteration_tokens_total_sum'] >= m['vllm:prompt_tokens_total'] + m['vllm:generation_tokens_total'] - 6,
      'iteration_tokens_total sum covers the prompts and outputs');

    // Logs: the start-up summary, the generation-config line, request logs, the stats line.
    const log = s.log();
    check(/KV cache: \d+ blocks of \d+ tokens = \d+ tokens; max_model_len 8192/.test(log), `start-up summary:\n${log}`);
    check(/dtype float32, device cpu/.test(log), 'start-up summary: dtype and device');
    check(log.includes('stored as F32 (--kv-cache-dtype auto)'), 'start-up summary: KV cache dtype');
    check(log.includes('Default sampling parameters have been overridden by the model\'s Hugging Face generation config: {"max_tokens":5,"temperature":0.0}'),
      'generation config line');
    check(log.includes('--trust-remote-code accepted'), 'trust-remote-code note');
    check(/Received request cmpl-\S+: prompt tokens \d+, params: \{.*"temperature":1\.5/.test(log), 'request received log');
    check(/Finished request chatcmpl-\S+: finish_reason \w+, prompt tokens \d+, generation tokens \d+, queue [\d.]+ s, prefill [\d.]+ s, decode [\d.]+ s, e2e [\d.]+ s/.test(log),
      'request finished log');
    check(/Engine 000: Avg prompt throughput: [\d.]+ tokens\/s, Avg generation throughput: [\d.]+ tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%/.test(log),
      'stats line');
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// VLLM_API_KEY from the environment; --generation-config vllm ignores the file, the override applies.
async function apiKeyAndOverride() {
  const dir = writeTinyModel();
  fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ temperature: 0.0, max_new_tokens: 5 }));
  const s = await startServer(['--generation-config', 'vllm', '--override-generation-config', '{"max_new_tokens": 3}',
    '--disable-log-stats', '--log-stats-interval', '0.2'], { modelDir: dir, positional: true, env: { VLLM_API_KEY: 'sekret' } });
  try {
    const anon = await fetch(`${s.base}/v1/models`);
    eq(anon.status, 401, 'VLLM_API_KEY enforced');
    const keyed = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: 'sekret', maxRetries: 0 });
    const r = await keyed.completions.create({ model: MODEL, prompt: 'Hello', ignore_eos: true });
    eq(r.usage.completion_tokens, 3, '--override-generation-config max_new_tokens over --generation-config vllm');
    check(s.log().includes('{"max_tokens":3}'), 'only the override is logged');
    await new Promise((res) => setTimeout(res, 500));  // a stats line would be due by now
    check(!/Engine 000:/.test(s.log()), '--disable-log-stats');
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

run(async () => {
  await vllmCommandLine();
  await apiKeyAndOverride();
}, 150000);
