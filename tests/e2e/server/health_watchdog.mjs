// /health tells the truth (issue 44): while the engine makes no progress with work pending
// (stalled by the --testing-stall-engine test hook), /health answers 503 with the reason within
// --engine-stall-timeout plus slack, answering at once from the I/O thread; once the engine moves
// again it answers 200, and the request completes. Both turns are logged once.
import { MODEL, check, eq, run, startServer } from './harness.mjs';

const BOUND_S = 0.5, STALL_S = 3;

async function health(base) {
  const t0 = performance.now();
  const r = await fetch(`${base}/health`);
  return { status: r.status, text: await r.text(), ms: performance.now() - t0 };
}

run(async () => {
  const s = await startServer(['--engine-stall-timeout', String(BOUND_S), '--testing-stall-engine', String(STALL_S)]);
  try {
    eq((await health(s.base)).status, 200, 'idle server is healthy');
    const t0 = performance.now();
    const req = s.client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0 });
    let first503 = null, slowest = 0, reason = '';
    while (performance.now() - t0 < (STALL_S - 0.5) * 1000) {
      const h = await health(s.base);
      slowest = Math.max(slowest, h.ms);
      if (h.status === 503 && first503 === null) { first503 = performance.now() - t0; reason = h.text; }
      await new Promise((r) => setTimeout(r, 50));
    }
    check(first503 !== null, '/health went 503 while the engine was stalled');
    check(first503 <= (BOUND_S + 1) * 1000, `503 within the bound + 1 s slack (${first503.toFixed(0)} ms)`);
    check(first503 >= BOUND_S * 1000 * 0.9, `not before the bound (${first503.toFixed(0)} ms)`);
    const body = JSON.parse(reason);
    check(/no progress for [0-9.]+ s with 1 request\(s\) pending/.test(body.error.message), `reason in the body: ${reason}`);
    check(slowest < 100, `/health answered from the I/O thread while the engine was stalled (slowest ${slowest.toFixed(0)} ms)`);
    const done = await req;
    eq(done.usage.completion_tokens, 4, 'the stalled request completes once the engine moves');
    eq((await health(s.base)).status, 200, 'healthy again after progress');
    check(/\/health: unhealthy: the engine has made no progress/.test(s.log()), `503 logged:\n${s.log()}`);
    eq((s.log().match(/\/health: unhealthy/g) ?? []).length, 1, 'the 503 is logged once, not per probe');
    check(/\/health: healthy again/.test(s.log()), 'recovery logged');
  } finally {
    await s.stop();
  }
}, 60000);
