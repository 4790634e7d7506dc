// /v1/embeddings of `nanovllm serve --runner pooling` with the official openai npm client (which
// asks for base64 by default and decodes it): the default call, encoding_format float and base64
// agree bit for bit, a batch equals its inputs one at a time, token ids equal their text, usage
// counts the prompt tokens, vectors are normalized (LAST pooling, vLLM's default for decoder
// models), Matryoshka `dimensions` on a model that declares none is vLLM's 400, and a generate
// model refuses embeddings.
import { MODEL, check, eq, run, startServer } from './harness.mjs';
const JSON_HEADERS = { 'content-type': 'application/json' };

function fromBase64(b64) {
  const buf = Buffer.from(b64, 'base64');
  return Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4));
}

async function status(promise) {
  try { await promise; return 200; } catch (e) { return e.status ?? -1; }
}

run(async () => {
  const s = await startServer(['--runner', 'pooling']);
  const c = s.client;
  try {
    const text = 'The capital of France is';
    const auto = await c.embeddings.create({ model: MODEL, input: text });
    const flt = await c.embeddings.create({ model: MODEL, input: text, encoding_format: 'float' });
    const b64 = await c.embeddings.create({ model: MODEL, input: text, encoding_format: 'base64' });
    const v = flt.data[0].embedding;
    eq(v.length, 64, 'one value per hidden unit');
    const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
    check(Math.abs(norm - 1) < 1e-5, `normalized (norm ${norm})`);
    eq(auto.data[0].embedding, v.map((x) => Math.fround(x)), 'the client\'s default (base64, decoded) == float');
    check(typeof b64.data[0].embedding === 'string', 'base64 asked for: a string');
    eq(fromBase64(b64.data[0].embedding), v.map((x) => Math.fround(x)), 'base64 decodes to the floats');
    eq(flt.object, 'list', 'list object');
    eq(flt.data[0].object, 'embedding', 'embedding object');

    const tok = await (await fetch(`${s.base}/tokenize`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ prompt: text }) })).json();
    eq([flt.usage.prompt_tokens, flt.usage.total_tokens, flt.usage.completion_tokens], [tok.count, tok.count, 0], 'usage counts the prompt (vLLM\'s UsageInfo)');
    const ids = await c.embeddings.create({ model: MODEL, input: tok.tokens, encoding_format: 'float' });
    eq(ids.data[0].embedding, v, 'token ids == their text');

    const texts = ['Hello there', text, 'A third, longer input to embed with the others'];
    const batch = await c.embeddings.create({ model: MODEL, input: texts, encoding_format: 'float' });
    eq(batch.data.map((d) => d.index), [0, 1, 2], 'batch indices');
    for (let i = 0; i < texts.length; ++i) {
      const one = await c.embeddings.create({ model: MODEL, input: texts[i], encoding_format: 'float' });
      const a = batch.data[i].embedding, b = one.data[0].embedding;
      check(a.length === b.length && a.every((x, k) => Math.abs(x - b[k]) <= 1e-5), `batch item ${i} == alone`);
    }

    eq(await status(c.embeddings.create({ model: MODEL, input: text, dimensions: 16 })), 400, 'dimensions without Matryoshka');
    eq(await status(c.completions.create({ model: MODEL, prompt: text, max_tokens: 4 })), 400, 'a pooling model does not generate');
  } finally {
    await s.stop();
  }
  const g = await startServer();
  try {
    eq(await status(g.client.embeddings.create({ model: MODEL, input: 'hi' })), 400, 'a generate model refuses embeddings');
  } finally {
    await g.stop();
  }
});
