// Load: 64 concurrent streaming clients (openai client, loopback) with mixed completions and
// chat requests, seeded sampling and greedy; each streamed text must equal the same request made
// alone without streaming. Afterwards /metrics shows nothing running and the KV cache idle.
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

const N = Number(process.env.NANOVLLM_LOAD_CLIENTS ?? 64);

function request(i) {
  const common = { model: MODEL, max_tokens: 8 + (i * 7) % 33, seed: 1000 + i, temperature: i % 4 === 0 ? 0 : 0.8 };
  if (i % 2 === 0) return { kind: 'chat', body: { ...common, messages: [{ role: 'user', content: `Question number ${i}: why?` }] } };
  return { kind: 'completions', body: { ...common, prompt: `Request ${i} says`.repeat(1 + (i % 5)) } };
}

async function streamed(c, r) {
  const api = r.kind === 'chat' ? c.chat.completions : c.completions;
  const stream = await api.create({ ...r.body, stream: true, stream_options: { include_usage: true } });
  let text = ''; let finish = null; let usage = null; let chunks = 0;
  for await (const ch of stream) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    for (const x of ch.choices) {
      text += x.delta ? (x.delta.content ?? '') : x.text;
      finish = x.finish_reason ?? finish;
    }
  }
  return { text, finish, usage, chunks };
}

run(async () => {
  const s = await startServer();
  const c = s.client;
  try {
    const reqs = Array.from({ length: N }, (_, i) => request(i));
    // References: one at a time, not streamed.
    const want = [];
    for (const r of reqs) {
      const api = r.kind === 'chat' ? c.chat.completions : c.completions;
      const o = await api.create(r.body);
      want.push({ text: r.kind === 'chat' ? o.choices[0].message.content : o.choices[0].text, finish: o.choices[0].finish_reason, usage: o.usage });
    }
    // All at once, streamed, while a sampler watches /metrics for concurrency.
    let peak = 0; let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const m = await metrics(s.base);
        peak = Math.max(peak, m['vllm:num_requests_running'] + m['vllm:num_requests_waiting']);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const t0 = Date.now();
    const got = await Promise.all(reqs.map((r) => streamed(c, r)));
    const secs = (Date.now() - t0) / 1000;
    sampling = false;
    await sampler;
    for (let i = 0; i < N; i++) {
      eq(got[i].text, want[i].text, `client ${i} (${reqs[i].kind}) streamed text`);
      eq(got[i].finish, want[i].finish, `client ${i} finish`);
      eq(got[i].usage, want[i].usage, `client ${i} usage`);
    }
    check(peak >= N / 4, `requests were batched concurrently (peak ${peak} in the engine)`);
    const m = await metrics(s.base);
    eq([m['vllm:num_requests_running'], m['vllm:num_requests_waiting'], m['nanovllm:num_requests_open']], [0, 0, 0], 'idle after load');
    eq([m['vllm:kv_cache_usage_perc'], m['nanovllm:kv_cache_blocks_used']], [0, 0], 'KV cache back at idle');
    check(s.alive(), 'server alive');
    console.log(`${N} concurrent streaming clients in ${secs.toFixed(2)} s, peak ${peak} requests in the engine`);
  } finally {
    await s.stop();
  }
});
