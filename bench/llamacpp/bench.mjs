// One llama.cpp latency run (node-llama-cpp's prebuilt CPU library): node bench.mjs MODEL.gguf
// PROMPT_TOKENS OUTPUT_TOKENS THREADS. Prints one JSON line: prompt and decode tok/s (greedy, a
// prompt of fixed pseudo-random token ids, no EOS stop) and the process's peak RSS.
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

const [modelPath, P, O, threads] = process.argv.slice(2);
const prompt = Number(P), output = Number(O);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
const ctx = await model.createContext({
  contextSize: 2048,
  batchSize: 512,
  threads: Number(threads),
  sequences: 1,
});
const seq = ctx.getSequence();
const tokens = Array.from({ length: prompt }, (_, i) => 1000 + ((i * 7919) % 100000));
const t0 = performance.now();
let t1 = 0, n = 0;
for await (const tok of seq.evaluate(tokens, { temperature: 0 })) {
  void tok;
  if (n === 0) t1 = performance.now();
  if (++n >= output) break;
}
const t2 = performance.now();
console.log(
  JSON.stringify({
    engine: 'llama.cpp',
    model: modelPath,
    threads: Number(threads),
    prompt_tokens: prompt,
    output_tokens: n,
    prompt_tok_s: prompt / ((t1 - t0) / 1e3),
    decode_tok_s: (n - 1) / ((t2 - t1) / 1e3),
    peak_rss_mib: process.resourceUsage().maxRSS / 1024,
  }),
);
await ctx.dispose();
await model.dispose();
