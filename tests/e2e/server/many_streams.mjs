// Thousands of concurrent streaming connections on loopback (default 2,000, NANOVLLM_STREAMS):
// every connection is accepted, every stream receives every token (its text equals the same
// request made alone, its usage counts all tokens), and the server's memory at that load is
// reported. Afterwards nothing runs and the KV cache is idle. With --async-scheduling (CUDA's
// default; forced here on the CPU), so streams join and finish while steps run ahead.
import fs from 'node:fs';
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

const N = Number(process.env.NANOVLLM_STREAMS ?? 2000);
const PROMPTS = 16;  // distinct greedy requests; stream i repeats request i % PROMPTS
const body = (i) => ({ model: MODEL, prompt: `Stream ${i % PROMPTS} tells a story:`, max_tokens: 8, temperature: 0, ignore_eos: true });

const rssMiB = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;

run(async () => {
  const s = await startServer(['--max-num-seqs', '256', '--async-scheduling']);
  const c = s.client;
  try {
    const want = [];
    for (let i = 0; i < PROMPTS; i++) want.push((await c.completions.create(body(i))).choices[0].text);
    const idleRss = rssMiB(s.proc.pid);
    let peakRss = idleRss; let peakOpen = 0; let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peakRss = Math.max(peakRss, rssMiB(s.proc.pid));
        peakOpen = Math.max(peakOpen, (await metrics(s.base))['nanovllm:num_requests_open']);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const t0 = Date.now();
    const got = await Promise.all(Array.from({ length: N }, async (_, i) => {
      const stream = await c.completions.create({ ...body(i), stream: true, stream_options: { include_usage: true } });
      let text = ''; let usage = null; let events = 0;
      for await (const ch of stream) {
        events++;
        if (ch.usage) usage = ch.usage;
        for (const x of ch.choices) text += x.text;
      }
      return { text, usage, events };
    }));
    const secs = (Date.now() - t0) / 1000;
    sampling = false;
    await sampler;
    let complete = 0;
    for (let i = 0; i < N; i++) {
      eq(got[i].text, want[i % PROMPTS], `stream ${i} text`);
      eq(got[i].usage?.completion_tokens, 8, `stream ${i} tokens`);
      complete++;
    }
    check(peakOpen >= Math.min(N, 1000), `connections were open concurrently (peak ${peakOpen} requests open)`);
    const m = await metrics(s.base);
    eq([m['vllm:num_requests_running'], m['vllm:num_requests_waiting'], m['nanovllm:num_requests_open'], m['nanovllm:kv_cache_blocks_used']],
      [0, 0, 0, 0], 'idle after the load');
    check(s.alive(), 'server alive');
    console.log(`${complete}/${N} concurrent streams complete in ${secs.toFixed(1)} s; peak ${peakOpen} requests open; ` +
      `server RSS ${idleRss.toFixed(0)} MiB idle, ${peakRss.toFixed(0)} MiB peak (+${((peakRss - idleRss) * 1024 / N).toFixed(1)} KiB per stream)`);
  } finally {
    await s.stop();
  }
}, 600000);
