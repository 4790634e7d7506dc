// Sampling fields through the official `openai` npm client: logprobs in vLLM's shapes (completions
// and chat, streamed and not) and consistent values, n parallel samples (distinct, indexed, sharing
// the prompt's KV blocks), penalties out of range, logit_bias forcing a token, min_tokens holding
// back a stop token.
import fs from 'node:fs';
import path from 'node:path';
import { MODEL, SRC, check, eq, metrics, run, startServer } from './harness.mjs';
const JSON_HEADERS = { 'content-type': 'application/json' };
const close = (a, b, tol = 1e-4) => Math.abs(a - b) <= tol;
const chars = (s) => [...s].length;

async function collect(stream) {
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  return chunks;
}

run(async () => {
  const s = await startServer(['--block-size', '16']);
  const c = s.client;
  const post = async (path, body) => {
    const r = await fetch(`${s.base}${path}`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
    return { status: r.status, body: await r.json() };
  };
  try {
    // Completions, greedy, logprobs: 3.
    const req = { model: MODEL, prompt: 'The capital of France is', max_tokens: 10, temperature: 0, logprobs: 3, ignore_eos: true };
    const a = await c.completions.create(req);
    const lp = a.choices[0].logprobs;
    eq(Object.keys(lp), ['text_offset', 'token_logprobs', 'tokens', 'top_logprobs'], 'completions logprobs keys');
    eq(lp.tokens.length, 10, 'one logprob per token');
    eq(lp.tokens.join(''), a.choices[0].text, 'tokens join to the text');
    eq(lp.text_offset[0], 0, 'text_offset starts at 0');
    for (let i = 0; i < 10; i++) {
      const top = lp.top_logprobs[i];
      const vals = Object.values(top);
      check(vals.length >= 1 && vals.length <= 4, `top_logprobs[${i}] has the sampled token + top 3 (got ${vals.length})`);
      check(close(lp.token_logprobs[i], Math.max(...vals), 1e-6), `greedy: chosen logprob is the top one at ${i}`);
      check(lp.token_logprobs[i] <= 0, 'a logprob is <= 0');
      eq(top[lp.tokens[i]], lp.token_logprobs[i], `top_logprobs holds the chosen token at ${i}`);
      if (i) eq(lp.text_offset[i], lp.text_offset[i - 1] + chars(lp.tokens[i - 1]), `text_offset ${i}`);
    }
    // Streamed: the same tokens and values, chunk by chunk.
    const chunks = await collect(await c.completions.create({ ...req, stream: true }));
    const st = { tokens: [], token_logprobs: [], text_offset: [] };
    for (const ch of chunks)
      for (const x of ch.choices)
        if (x.logprobs) for (const k of Object.keys(st)) st[k].push(...x.logprobs[k]);
    eq(st.tokens, lp.tokens, 'streamed logprobs tokens');
    check(st.token_logprobs.every((v, i) => close(v, lp.token_logprobs[i], 1e-6)), 'streamed token_logprobs');
    eq(st.text_offset, lp.text_offset, 'streamed text_offset');

    // Chat: logprobs true, top_logprobs 2.
    const chatReq = { model: MODEL, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2, ignore_eos: true };
    const ca = await c.chat.completions.create(chatReq);
    const content = ca.choices[0].logprobs.content;
    eq(content.length, 8, 'chat: one entry per token');
    eq(content.map((e) => e.token).join(''), ca.choices[0].message.content, 'chat tokens join to the content');
    for (const e of content) {
      eq(Object.keys(e), ['token', 'logprob', 'bytes', 'top_logprobs'], 'chat logprobs entry keys');
      eq(e.bytes, [...Buffer.from(e.token, 'utf8')], 'bytes are the token\'s UTF-8');
      eq(e.top_logprobs.length, 2, 'top_logprobs: 2');
      eq(e.top_logprobs[0].token, e.token, 'greedy: the chosen token is the top one');
      eq(e.top_logprobs[0].logprob, e.logprob, 'greedy: its logprob is the top one');
      check(e.top_logprobs[1].logprob <= e.top_logprobs[0].logprob, 'top_logprobs best first');
    }
    const cchunks = await collect(await c.chat.completions.create({ ...chatReq, stream: true }));
    const scontent = cchunks.flatMap((ch) => ch.choices.flatMap((x) => x.logprobs?.content ?? []));
    eq(scontent.map((e) => e.token), content.map((e) => e.token), 'streamed chat logprobs tokens');
    check(scontent.every((e, i) => close(e.logprob, content[i].logprob, 1e-6)), 'streamed chat logprobs values');
    const none = await c.chat.completions.create({ ...chatReq, logprobs: false, top_logprobs: undefined });
    eq(none.choices[0].logprobs, null, 'no logprobs unless asked');

    // n = 3: distinct samples with indices; seeded: the same again, streamed or not; usage counts all.
    const prompt = 'hello '.repeat(60);
    const before = await metrics(s.base);
    const nReq = { model: MODEL, prompt, max_tokens: 6, temperature: 1.0, n: 3, seed: 11, ignore_eos: true };
    const n3 = await c.completions.create(nReq);
    eq(n3.choices.map((x) => x.index), [0, 1, 2], 'n=3 indices');
    check(new Set(n3.choices.map((x) => x.text)).size === 3, `n=3 gives distinct samples: ${JSON.stringify(n3.choices.map((x) => x.text))}`);
    eq(n3.usage.completion_tokens, 18, 'usage counts every choice');
    const after = await metrics(s.base);
    const hits = after['vllm:prefix_cache_hits_total'] - before['vllm:prefix_cache_hits_total'];
    check(hits >= 2 * 48, `choices 1 and 2 read the prompt's blocks from the prefix cache (hits ${hits})`);
    const n3s = await collect(await c.completions.create({ ...nReq, stream: true }));
    const parts = ['', '', ''];
    for (const ch of n3s) for (const x of ch.choices) parts[x.index] += x.text;
    eq(parts, n3.choices.map((x) => x.text), 'n=3 streamed per index == non-streamed');
    const n2chat = await c.chat.completions.create({ ...chatReq, n: 2, temperature: 1, seed: 3, logprobs: false, top_logprobs: undefined });
    eq(n2chat.choices.map((x) => x.index), [0, 1], 'chat n=2 indices');
    const bo = await post('/v1/completions', { ...nReq, best_of: 5 });
    eq([bo.status, bo.body.error?.param], [400, 'best_of'], 'best_of != n is refused');

    // Out of range: 400 naming the field.
    for (const [f, v, msg] of [['presence_penalty', 2.5, 'must be in [-2, 2]'], ['frequency_penalty', -3, 'must be in [-2, 2]'],
      ['repetition_penalty', 0, 'greater than zero'], ['min_tokens', 50, 'less than or equal to max_tokens'],
      ['logprobs', 21, 'greater than max allowed: 20'], ['prompt_logprobs', 21, 'greater than max allowed: 20']]) {
      const r = await post('/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 5, [f]: v });
      eq([r.status, r.body.error?.param], [400, f], `${f}=${v}: 400`);
      check(r.body.error.message.includes(msg), `${f}: message "${r.body.error.message}" says "${msg}"`);
    }
    const oov = await post('/v1/completions', { model: MODEL, prompt: 'x', logit_bias: { 999999: 5 } });
    eq([oov.status, oov.body.error?.param], [400, 'logit_bias'], 'logit_bias out of vocab: 400');
    check(oov.body.error.message.includes('999999'), 'the message names the id');

    const ps = await post('/v1/completions', { model: MODEL, prompt: 'x', prompt_logprobs: 1, stream: true });
    eq([ps.status, ps.body.error?.param], [400, 'prompt_logprobs'], 'streamed prompt_logprobs: 400 (not implemented)');
    const pc = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'x' }], prompt_logprobs: 1 });
    eq([pc.status, pc.body.error?.param], [400, 'prompt_logprobs'], 'chat prompt_logprobs: 400 (not implemented)');

    // echo and prompt_logprobs (completions).
    const ptext = 'The capital of France is';
    const ptok = (await post('/tokenize', { prompt: ptext })).body.tokens;
    const P = ptok.length;
    const plain = await c.completions.create({ model: MODEL, prompt: ptext, max_tokens: 5, temperature: 0, ignore_eos: true });
    const echoed = await c.completions.create({ model: MODEL, prompt: ptext, max_tokens: 5, temperature: 0, ignore_eos: true, echo: true, logprobs: 2 });
    const ec = echoed.choices[0];
    eq(ec.text, ptext + plain.choices[0].text, 'echo: the prompt, then the completion');
    eq(ec.logprobs.tokens.length, P + 5, 'echo: logprobs of prompt and completion tokens');
    eq(ec.logprobs.tokens.join(''), ec.text, 'echo: tokens join to the text');
    eq([ec.logprobs.token_logprobs[0], ec.logprobs.top_logprobs[0]], [null, null], 'echo: the first prompt token has no logprob');
    eq(ec.logprobs.text_offset[P], chars(ptext), 'echo: the completion starts after the prompt');
    eq(ec.prompt_logprobs.length, P, 'echo with logprobs computes prompt_logprobs');
    for (let i = 1; i < P; i++) {
      const e = ec.prompt_logprobs[i][String(ptok[i])];
      eq(Object.keys(e), ['logprob', 'rank', 'decoded_token'], `prompt_logprobs[${i}] entry keys`);
      check(close(e.logprob, ec.logprobs.token_logprobs[i], 1e-6), `prompt logprob ${i} == echoed token logprob`);
      check(Number.isInteger(e.rank) && e.rank >= 1, `rank ${e.rank}`);
      eq(e.decoded_token, ec.logprobs.tokens[i], `decoded_token ${i}`);
      check(Object.keys(ec.prompt_logprobs[i]).length <= 3, 'the prompt token and the top 2');
    }
    eq(ec.prompt_logprobs[0], null, 'prompt_logprobs[0] is null');
    const es = await collect(await c.completions.create({ model: MODEL, prompt: ptext, max_tokens: 5, temperature: 0, ignore_eos: true, echo: true, logprobs: 2, stream: true }));
    eq(es.map((ch) => ch.choices.map((x) => x.text).join('')).join(''), ec.text, 'streamed echo text');
    eq(es.flatMap((ch) => ch.choices.flatMap((x) => x.logprobs?.tokens ?? [])), ec.logprobs.tokens, 'streamed echo logprobs tokens');
    const pl2 = await c.completions.create({ model: MODEL, prompt: ptext, max_tokens: 2, n: 2, temperature: 1, seed: 4, prompt_logprobs: 0 });
    eq(pl2.choices[1].prompt_logprobs, pl2.choices[0].prompt_logprobs, 'n=2: every choice carries the prompt logprobs');
    check(pl2.choices[0].prompt_logprobs.slice(1).every((d, i) => Object.keys(d).length === 1 && String(ptok[i + 1]) in d), 'prompt_logprobs 0: the prompt token only');
    check(!('prompt_logprobs' in plain.choices[0]), 'no prompt_logprobs unless asked');

    // logit_bias 100 on one token: every output token is that token (sampled, not greedy).
    const tok = (await post('/tokenize', { prompt: ' Paris' })).body.tokens[0];
    const text = (await post('/detokenize', { tokens: [tok] })).body.prompt;
    const forced = await c.completions.create({ model: MODEL, prompt: 'x y z', max_tokens: 7, temperature: 1, seed: 1, logit_bias: { [tok]: 100 }, ignore_eos: true });
    eq(forced.choices[0].text, text.repeat(7), 'logit_bias 100 forces the token');

    // min_tokens: the forced token is also a stop token: without min_tokens it stops at once.
    const base = { model: MODEL, prompt: 'a b c', max_tokens: 10, temperature: 0, logit_bias: { [tok]: 100 }, stop_token_ids: [tok] };
    const early = await c.completions.create(base);
    eq([early.usage.completion_tokens, early.choices[0].finish_reason], [1, 'stop'], 'stop token at once');
    const held = await c.completions.create({ ...base, min_tokens: 4 });
    eq([held.usage.completion_tokens, held.choices[0].finish_reason], [5, 'stop'], 'min_tokens 4 holds the stop token back');
    check(s.alive(), 'server still running');
  } finally {
    await s.stop();
  }

  // Logprobs against transformers: the fixture model's real weights (no tokenizer: token-id prompts,
  // tokens named token_id:N), log_softmax of reference.json's logits within 1e-4 along the greedy path.
  const fixture = path.join(SRC, 'tests/fixtures/tiny-qwen3-untied');
  const ref = JSON.parse(fs.readFileSync(path.join(fixture, 'reference.json'), 'utf8'));
  // The CPU's exact path (FP32 weights): the fixture's F32 weights as transformers ran them.
  const f = await startServer(['--skip-tokenizer-init', '--kernel-options', 'cpu_precision=exact'], {
    modelDir: fixture,
    loadFormat: 'auto',
  });
  try {
    let compared = 0;
    for (const pr of ref.prompts.slice(0, 4)) {
      const r = await f.client.completions.create({ model: MODEL, prompt: pr.prompt_token_ids, max_tokens: ref.max_new_tokens, temperature: 0, ignore_eos: true, logprobs: 5 });
      const lp = r.choices[0].logprobs;
      const ids = r.choices[0].token_ids;
      for (let s2 = 0; s2 < ids.length && ids[s2] === pr.greedy_token_ids[s2]; s2++) {
        const x = pr.logits[s2];
        const mx = Math.max(...x);
        const lse = mx + Math.log(x.reduce((a, v) => a + Math.exp(v - mx), 0));
        check(close(lp.token_logprobs[s2], x[ids[s2]] - lse, 1e-4), `fixture logprob step ${s2}: ${lp.token_logprobs[s2]} vs ${x[ids[s2]] - lse}`);
        eq(lp.tokens[s2], `token_id:${ids[s2]}`, 'tokens named by id without a tokenizer');
        for (const [k, v] of Object.entries(lp.top_logprobs[s2])) {
          const id = Number(k.split(':')[1]);
          check(close(v, x[id] - lse, 1e-4), `fixture top logprob of ${k} at step ${s2}`);
        }
        compared++;
      }
    }
    check(compared >= 40, `compared ${compared} fixture steps`);
  } finally {
    await f.stop();
  }
});
