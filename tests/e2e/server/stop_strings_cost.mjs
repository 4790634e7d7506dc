// Requests with large stop-string lists cost about their size, once (issue 44):
//   - n = 256 choices over a 0.2 MB list: the server's peak RSS grows by a bounded amount (the
//     choices share one list and one automaton; before, each held deep copies: +0.6 GB), or the
//     request is refused with a 400 naming `stop` (a cap on stop strings);
//   - a 1.8 MB list with n = 8 streaming next to another user's stream: that stream's gaps
//     between tokens stay close to what they are next to the same request without stop strings
//     (matching is one pass over the new text; before, every stop string was searched at every
//     token of every choice: the gaps doubled here, 15-20x in the probe).
// Prints the figures. NANOVLLM_BINARY may point at another build to compare.
import fs from 'node:fs';
import { MODEL, check, run, startServer } from './harness.mjs';

const mb = (b) => (b / 1048576).toFixed(1);

function memory(pid) {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number(s.match(new RegExp(`${k}:\\s+(\\d+)`))[1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

// Distinct stop strings of `len` bytes, `bytes` in all, that the model's text never completes.
function stopList(bytes, len) {
  const out = [];
  for (let i = 0, total = 0; total < bytes; ++i, total += len) out.push(`zq${i.toString(36)}`.padEnd(len, 'x'));
  return out;
}

async function post(base, body) {
  const r = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, ...body }),
  });
  return { status: r.status, json: await r.json() };
}

// Mean gap (ms) between the streamed tokens of a short greedy request.
async function meanGap(client) {
  const t = [];
  const stream = await client.completions.create({
    model: MODEL, prompt: 'hello there', max_tokens: 30, temperature: 0, ignore_eos: true, stream: true,
  });
  for await (const c of stream) if (c.choices?.[0]?.text !== undefined) t.push(performance.now());
  check(t.length >= 20, `the short stream got ${t.length} chunks`);
  return (t[t.length - 1] - t[1]) / (t.length - 2);
}

run(async () => {
  const s = await startServer(['--max-num-seqs', '256']);
  try {
    // n = 256 over 0.2 MB of stop strings.
    // The same request without stop strings first: its peak (256 rows of logits...) is the base.
    check((await post(s.base, { prompt: 'hello', max_tokens: 2, n: 256, ignore_eos: true })).status === 200, 'n=256');
    const before = memory(s.proc.pid);
    const r = await post(s.base, { prompt: 'hello', max_tokens: 2, n: 256, ignore_eos: true, stop: stopList(200000, 10) });
    const after = memory(s.proc.pid);
    const grew = after.peak - before.peak;
    console.log(`n=256, 0.2 MB of stop strings: status ${r.status}, peak RSS ${mb(before.peak)} -> ${mb(after.peak)} MB ` +
      `(+${mb(grew)} MB over the same request without them; RSS after ${mb(after.rss)} MB)`);
    if (r.status === 200) {
      check(r.json.choices.length === 256, `256 choices, got ${r.json.choices.length}`);
      check(grew < 64 * 1048576, `peak RSS grew by ${mb(grew)} MB for one request of n=256 (bound: 64 MB)`);
    } else {
      check(r.status === 400 && r.json.error?.param === 'stop', `refused with a 400 naming stop: ${JSON.stringify(r.json)}`);
    }

    // Another user's stream next to the same n = 8 request without and with 1.8 MB of short stop
    // strings (300,000): the stop strings must add next to nothing to its gaps.
    const gaps = {};
    for (const [name, stop] of [['without', undefined], ['with', stopList(1800000, 6)]]) {
      const big = new AbortController();
      const body = { model: MODEL, prompt: 'a long answer', max_tokens: 4000, n: 8, ignore_eos: true, stream: true, stop };
      const res = await fetch(`${s.base}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: big.signal,
      });
      if (res.status !== 200) {
        const j = await res.json();
        console.log(`1.8 MB of stop strings: refused (${res.status})`);
        check(name === 'with' && res.status === 400 && j.error?.param === 'stop', `refused naming stop: ${JSON.stringify(j)}`);
        break;
      }
      const reader = res.body.getReader();
      await reader.read();  // its first bytes: it is in the engine
      gaps[name] = await meanGap(s.client);
      big.abort();
      await reader.cancel().catch(() => {});
    }
    if (gaps.with !== undefined) {
      console.log(`another stream's mean token gap next to n=8: ${gaps.without.toFixed(2)} ms, ` +
        `${gaps.with.toFixed(2)} ms when it has 1.8 MB of stop strings (${(gaps.with / gaps.without).toFixed(2)}x)`);
      check(gaps.with < 1.5 * gaps.without + 5, `the gap went from ${gaps.without.toFixed(2)} to ${gaps.with.toFixed(2)} ms`);
    }
    check(s.alive(), 'the server is still up');
  } finally {
    await s.stop();
  }
}, 120000);
