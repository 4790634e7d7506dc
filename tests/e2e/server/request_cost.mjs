// Bounded cost per request (issue 44): a ~200-byte request whose own chat_template renders tens
// of MB, or loops without printing, is refused fast with a 400 naming the limit, and rendering
// and tokenizing run on the request pool, so /health stays fast while such requests arrive;
// past the pool's queue bound the answer is 503. Caps on stop strings, request ids, logit_bias,
// prompt logprobs and prompt bytes are 400s naming the field and the setting.
import { MODEL, check, eq, run, startServer } from './harness.mjs';

const post = (base, path, body, headers = {}) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
const chat = (template, extra = {}) => ({
  model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, chat_template: template, ...extra,
});
// ~150 bytes that would render 64 MB; a million-item range (96 MB of values, refused before it is
// made); and a loop that prints nothing but copies 2^40 elements.
const X64 = 'x'.repeat(64);
const OUTPUT_BOMB = `{% for i in range(1000) %}{% for j in range(1000) %}{{ '${X64}' }}{% endfor %}{% endfor %}`;
const RANGE_BOMB = `{% for i in range(1000000) %}{{ '${X64}' }}{% endfor %}`;
const WORK_BOMB = "{% set ns = namespace(l=['abc']) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}x";

// /health round trips while `busy` runs, in ms, slowest last.
async function healthDuring(base, busy) {
  const times = [];
  let done = false;
  const probe = (async () => {
    while (!done) {
      const t0 = performance.now();
      const r = await fetch(`${base}/health`);
      check(r.ok, '/health answers while the pool is busy');
      times.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try { await busy(); } finally { done = true; }
  await probe;
  return times.sort((a, b) => a - b);
}

async function errorOf(res) {
  const body = await res.json();
  return { status: res.status, ...body.error };
}

run(async () => {
  // Both servers start together (start-up is most of this test's time).
  const [s, q] = await Promise.all([startServer(['--max-prompt-logprob-entries', '1000']),
    startServer(['--request-threads', '1', '--max-queued-requests', '1'])]);
  try {
    // The template bombs: 400s naming the limit, each in well under a second.
    const t0 = performance.now();
    let e = await errorOf(await post(s.base, '/v1/chat/completions', chat(OUTPUT_BOMB)));
    const bombMs = performance.now() - t0;
    eq([e.status, e.param], [400, 'chat_template'], 'output bomb refused');
    check(e.message.includes('output exceeds 131072 bytes') && e.message.includes('max_model_len 4096'),
      `output bomb names the limit: ${e.message}`);
    check(bombMs < 2000, `output bomb refused in ${bombMs.toFixed(0)} ms`);
    for (const [name, bomb] of [['range', RANGE_BOMB], ['work', WORK_BOMB]]) {
      const t1 = performance.now();
      e = await errorOf(await post(s.base, '/v1/chat/completions', chat(bomb)));
      const ms = performance.now() - t1;
      eq([e.status, e.param], [400, 'chat_template'], `${name} bomb refused`);
      check(e.message.includes('work limit'), `${name} bomb names the work limit: ${e.message}`);
      check(ms < 2000, `${name} bomb refused in ${ms.toFixed(0)} ms`);
      console.log(`${name} bomb: ${ms.toFixed(1)} ms`);
    }
    // /tokenize renders through the same path.
    e = await errorOf(await post(s.base, '/tokenize', chat(OUTPUT_BOMB)));
    eq([e.status, e.param], [400, 'chat_template'], '/tokenize output bomb refused');

    // Four bombs at a time, again and again: /health stays fast.
    // A bomb rendered on an I/O thread holds it for its whole render (hundreds of ms here), so
    // /health probes would queue behind each round; one probe past 100 ms is allowed for the
    // test machine's own scheduling (a shared host stalls a process now and then).
    const times = await healthDuring(s.base, async () => {
      for (let round = 0; round < 5; round++) {
        const statuses = await Promise.all([OUTPUT_BOMB, WORK_BOMB, RANGE_BOMB, WORK_BOMB].map((t) =>
          post(s.base, '/v1/chat/completions', chat(t)).then(async (r) => { await r.arrayBuffer(); return r.status; })));
        eq(statuses, [400, 400, 400, 400], 'every bomb is refused');
      }
    });
    const worst = times[times.length - 1], p99 = times[Math.floor(times.length * 0.99)];
    const slow = times.filter((t) => t >= 100);
    console.log(`template bomb: ${bombMs.toFixed(1)} ms; /health while 4 run: worst ${worst.toFixed(1)} ms, ` +
      `p99 ${p99.toFixed(1)} ms, ${slow.length} of ${times.length} probes >= 100 ms`);
    check(times.length >= 10, `/health was probed while bombs ran (${times.length} probes)`);
    check(slow.length <= 1, `/health took ${slow.map((t) => t.toFixed(0))} ms while bombs ran`);

    // A prompt whose bytes alone exceed what max_model_len tokens can hold: refused before tokenizing.
    e = await errorOf(await post(s.base, '/v1/completions', { model: MODEL, prompt: 'ab'.repeat(70000), max_tokens: 1 }));
    eq([e.status, e.param], [400, 'prompt'], 'prompt bytes refused');
    check(e.message.includes('140000 bytes') && e.message.includes('131072'), `prompt bytes named: ${e.message}`);

    // Caps, through the official client: 400s naming the field and the setting.
    const refused = async (params, param, words) => {
      try {
        await s.client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 1, ...params });
      } catch (err) {
        eq([err.status, err.param], [400, param], `${param} refused`);
        for (const w of words) check(err.message.includes(w), `${param}: '${w}' in ${err.message}`);
        return;
      }
      throw new Error(`FAIL: ${param} accepted`);
    };
    await refused({ stop: Array.from({ length: 129 }, (_, i) => `s${i}`) }, 'stop', ['129 stop strings', '--max-stop-strings']);
    await refused({ stop: ['x'.repeat(20000)] }, 'stop', ['20000 bytes', '--max-stop-bytes']);
    await refused({ request_id: 'r'.repeat(513) }, 'request_id', ['513 bytes', '--max-request-id-length']);
    await refused({ prompt: 'Hello '.repeat(200), prompt_logprobs: 5 }, 'prompt_logprobs', ['--max-prompt-logprob-entries']);
    const bias = {};
    for (let i = 0; i <= 151936; i++) bias[i] = 1;
    await refused({ logit_bias: bias }, 'logit_bias', ['151937 entries', 'vocabulary']);
    // The header is capped like the field.
    e = await errorOf(await post(s.base, '/v1/completions', { model: MODEL, prompt: 'Hi', max_tokens: 1 },
      { 'x-request-id': 'h'.repeat(600) }));
    eq([e.status, e.param], [400, 'request_id'], 'X-Request-Id refused');
    // Within the caps, all is served.
    const ok = await s.client.completions.create({ model: MODEL, prompt: 'Hello there', max_tokens: 2,
      stop: Array.from({ length: 128 }, (_, i) => `stop${i}`), request_id: 'r'.repeat(512), prompt_logprobs: 1 });
    eq(ok.choices.length, 1, 'a request within every cap is served');
    check(ok.id.endsWith('r'.repeat(512)), 'the long-but-allowed request id is kept');

    // Past the pool's queue bound (q: one thread, one place): 503 naming the setting, and the
    // server keeps serving.
    // ~100,000 loop steps before the work limit: long enough for 16 requests to find the one
    // thread busy and its one queue place taken.
    const busyTemplate = "{% for i in range(200000) %}{% if i is number %}{% endif %}{% endfor %}";
    const statuses = await Promise.all(Array.from({ length: 16 }, async () => {
      const r = await post(q.base, '/v1/chat/completions', chat(busyTemplate));
      const body = await r.json();
      if (r.status === 503) check(body.error.message.includes('--max-queued-requests'), '503 names the setting');
      return r.status;
    }));
    check(statuses.includes(503), `a full queue answers 503 (got ${statuses})`);
    check(statuses.every((st) => st === 503 || st === 400), `every other request is answered (got ${statuses})`);
    const r = await q.client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 1 });
    eq(r.choices.length, 1, 'served after the burst');
  } finally {
    await Promise.all([s.stop(), q.stop()]);
  }
});
