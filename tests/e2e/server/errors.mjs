// A corpus of bad requests, each answered with the right HTTP status and an OpenAI-style error
// {"error": {"message", "type", "param", "code"}} naming the problem, sent all at once while a
// good streaming request runs: the server stays up and the good request is unaffected.
import { MODEL, check, eq, run, startServer } from './harness.mjs';

const KEY = 'sk-test-key';
const LIMIT = 65536;
const J = (o) => JSON.stringify(o);
const C = (o) => J({ model: MODEL, prompt: 'Hello', ...o });          // completions body
const CH = (o) => J({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], ...o });  // chat body
const long = Array.from({ length: 5000 }, () => 11).slice();

// [name, path, body, status, param (null: none), message fragment, extra headers]
const corpus = [
  ['malformed JSON', '/v1/completions', '{"prompt": "x",', 400, null, 'not valid JSON'],
  ['empty body', '/v1/completions', '', 400, null, 'not valid JSON'],
  ['JSON array body', '/v1/completions', '[1, 2]', 400, null, 'must be a JSON object'],
  ['JSON string body', '/v1/chat/completions', '"hi"', 400, null, 'must be a JSON object'],
  ['trailing garbage', '/v1/completions', '{"prompt": "x"} xx', 400, null, 'not valid JSON'],
  ['missing prompt', '/v1/completions', J({ model: MODEL }), 400, 'prompt', "'prompt' is required"],
  ['missing messages', '/v1/chat/completions', J({ model: MODEL }), 400, 'messages', "'messages' is required"],
  ['prompt is a number', '/v1/completions', C({ prompt: 42 }), 400, 'prompt', "'prompt' must be"],
  ['prompt is an empty list', '/v1/completions', C({ prompt: [] }), 400, 'prompt', "'prompt' must be"],
  ['prompt mixes ids and text', '/v1/completions', C({ prompt: [1, 'a'] }), 400, 'prompt', 'integer token ids'],
  ['prompt list with a number', '/v1/completions', C({ prompt: [[1, 2], 'x', 3] }), 400, 'prompt', "'prompt' must be"],
  ['negative token id', '/v1/completions', C({ prompt: [1, -2] }), 400, 'prompt', 'out of range'],
  ['token id beyond the vocabulary', '/v1/completions', C({ prompt: [1, 200000] }), 400, 'prompt', 'outside the vocabulary'],
  ['empty prompt', '/v1/completions', C({ prompt: '' }), 400, 'prompt', 'the prompt is empty'],
  ['messages not a list', '/v1/chat/completions', CH({ messages: 'hi' }), 400, 'messages', 'non-empty list'],
  ['messages empty', '/v1/chat/completions', CH({ messages: [] }), 400, 'messages', 'non-empty list'],
  ['message without role', '/v1/chat/completions', CH({ messages: [{ content: 'x' }] }), 400, 'messages[0].role', "needs a string 'role'"],
  ['message content a number', '/v1/chat/completions', CH({ messages: [{ role: 'user', content: 5 }] }), 400, 'messages[0].content', 'must be a string'],
  ['image content part', '/v1/chat/completions', CH({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 400, 'messages[0].content', 'only text parts'],
  ['unknown model', '/v1/completions', C({ model: 'gpt-4' }), 404, 'model', "The model 'gpt-4' does not exist"],
  ['unknown model (chat)', '/v1/chat/completions', CH({ model: 'nope' }), 404, 'model', 'does not exist'],
  ['model not a string', '/v1/completions', C({ model: 7 }), 400, 'model', "'model' must be a string"],
  ['prompt too long (ids)', '/v1/completions', C({ prompt: long }), 400, 'prompt', 'maximum context length is 4096'],
  ['prompt too long (text)', '/v1/completions', C({ prompt: 'hello '.repeat(5000) }), 400, 'prompt', 'maximum context length is 4096'],
  ['chat prompt too long', '/v1/chat/completions', CH({ messages: [{ role: 'user', content: 'hi '.repeat(5000) }] }), 400, 'messages', 'maximum context length'],
  ['max_tokens 0', '/v1/completions', C({ max_tokens: 0 }), 400, 'max_tokens', 'at least 1'],
  ['max_tokens negative', '/v1/completions', C({ max_tokens: -5 }), 400, 'max_tokens', 'at least 1'],
  ['max_tokens a string', '/v1/completions', C({ max_tokens: 'ten' }), 400, 'max_tokens', 'must be an integer'],
  ['max_tokens fractional', '/v1/completions', C({ max_tokens: 1.5 }), 400, 'max_tokens', 'must be an integer'],
  ['max_tokens beyond the context', '/v1/completions', C({ max_tokens: 4096 }), 400, 'max_tokens', 'you requested 4097 tokens'],
  ['chat max_completion_tokens 0', '/v1/chat/completions', CH({ max_completion_tokens: 0 }), 400, 'max_completion_tokens', 'at least 1'],
  ['negative temperature', '/v1/completions', C({ temperature: -0.5 }), 400, 'temperature', 'temperature must be a finite number >= 0'],
  ['temperature a string', '/v1/chat/completions', CH({ temperature: 'hot' }), 400, 'temperature', "'temperature' must be a number"],
  ['top_p 0', '/v1/completions', C({ top_p: 0 }), 400, 'top_p', 'top_p must be in (0, 1]'],
  ['top_p 1.5', '/v1/completions', C({ top_p: 1.5 }), 400, 'top_p', 'top_p must be in (0, 1]'],
  ['top_k -2', '/v1/completions', C({ top_k: -2 }), 400, 'top_k', 'top_k must be'],
  ['min_p 2', '/v1/completions', C({ min_p: 2 }), 400, 'min_p', 'min_p must be in [0, 1]'],
  ['n 0', '/v1/completions', C({ n: 0 }), 400, 'n', 'n must be in [1, 256]'],
  ['best_of above n', '/v1/completions', C({ best_of: 3 }), 400, 'best_of', 'best_of is not supported unless it equals n'],
  ['presence_penalty 2.5', '/v1/completions', C({ presence_penalty: 2.5 }), 400, 'presence_penalty', 'presence_penalty must be in [-2, 2]'],
  ['repetition_penalty 0', '/v1/chat/completions', CH({ repetition_penalty: 0 }), 400, 'repetition_penalty', 'greater than zero'],
  ['logit_bias key not an id', '/v1/completions', C({ logit_bias: { abc: 1 } }), 400, 'logit_bias', 'must be an integer'],
  ['top_logprobs without logprobs', '/v1/chat/completions', CH({ top_logprobs: 2 }), 400, 'top_logprobs', '`logprobs` must be set to true'],
  ['echo a string', '/v1/completions', C({ echo: 'yes' }), 400, 'echo', "'echo' must be a boolean"],
  ['stream a string', '/v1/completions', C({ stream: 'yes' }), 400, 'stream', "'stream' must be a boolean"],
  ['stop a number', '/v1/completions', C({ stop: 5 }), 400, 'stop', "'stop' must be a string or a list"],
  ['empty stop string', '/v1/completions', C({ stop: [''] }), 400, 'stop', 'must not be empty'],
  ['stop_token_ids a string', '/v1/completions', C({ stop_token_ids: 'x' }), 400, 'stop_token_ids', 'a list of integers'],
  ['seed a string', '/v1/completions', C({ seed: 'abc' }), 400, 'seed', "'seed' must be an integer"],
  ['ignore_eos a string', '/v1/completions', C({ ignore_eos: 'no' }), 400, 'ignore_eos', 'a boolean'],
  ['logprobs above --max-logprobs', '/v1/completions', C({ logprobs: 25 }), 400, 'logprobs', 'greater than max allowed: 20'],
  ['chat logprobs not a boolean', '/v1/chat/completions', CH({ logprobs: 3 }), 400, 'logprobs', 'must be a boolean'],
  ['stream_options not an object', '/v1/chat/completions', CH({ stream: true, stream_options: 3 }), 400, 'stream_options', 'an object'],
  ['enable_thinking not a boolean', '/v1/chat/completions', CH({ chat_template_kwargs: { enable_thinking: 'yes' } }), 400, 'chat_template_kwargs.enable_thinking', 'a boolean'],
  ['tools not a list', '/v1/chat/completions', CH({ tools: { name: 'f' } }), 400, 'tools', 'a list of tools'],
  ['invalid UTF-8 byte', '/v1/completions', Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff]), Buffer.from('"}')]), 400, null, 'not valid UTF-8 (byte offset 13)'],
  ['truncated UTF-8 sequence', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'), Buffer.from([0xe2, 0x82]), Buffer.from('"}]}')]), 400, null, 'not valid UTF-8'],
  ['oversized body', '/v1/completions', C({ prompt: 'x'.repeat(LIMIT + 10) }), 413, null, `limit of ${LIMIT} bytes`],
  ['missing API key', '/v1/completions', C({}), 401, null, 'missing API key', { authorization: null }],
  ['wrong API key', '/v1/completions', C({}), 401, null, 'invalid API key', { authorization: 'Bearer sk-wrong' }],
  ['malformed Authorization', '/v1/chat/completions', CH({}), 401, null, 'invalid API key', { authorization: KEY }],
  ['unknown route', '/v1/nope', C({}), 404, null, 'no route for POST /v1/nope'],
  ['tokenize without prompt', '/tokenize', J({}), 400, 'prompt', "'prompt' or 'messages' is required"],
  ['detokenize tokens not a list', '/detokenize', J({ tokens: 'abc' }), 400, 'tokens', 'a list of integer token ids'],
  ['detokenize unknown id', '/detokenize', J({ tokens: [1, 999999] }), 400, 'tokens', '999999'],
  // Client mistakes that used to be 500s, wrap around, or crash the server.
  ['number overflowing a double', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "temperature": 1e400}`, 400, null, 'number overflow'],
  ['content part type not a string', '/v1/chat/completions', CH({ messages: [{ role: 'user', content: [{ type: 5, text: 'x' }] }] }), 400, 'messages[0].content', 'only text parts'],
  ['content part type an object', '/v1/chat/completions', CH({ messages: [{ role: 'user', content: [{ type: { a: 1 }, text: 'x' }] }] }), 400, 'messages[0].content', 'only text parts'],
  ['top_k 2^64-1', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "top_k": 18446744073709551615}`, 400, 'top_k', 'out of range'],
  ['max_tokens 2^63', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "max_tokens": 9223372036854775808}`, 400, 'max_tokens', 'out of range'],
  ['n 2^64-1', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "n": 18446744073709551615}`, 400, 'n', 'out of range'],
  ['seed past 2^64', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "seed": 18446744073709551616}`, 400, 'seed', 'must be an integer'],
  ['token id 2^63', '/v1/completions', `{"model": "${MODEL}", "prompt": [1, 9223372036854775808]}`, 400, 'prompt', 'out of range'],
  ['stop token id 2^63', '/v1/completions', `{"model": "${MODEL}", "prompt": "x", "stop_token_ids": [9223372036854775808]}`, 400, 'stop_token_ids', 'out of range'],
  ['deep nesting in an ignored field', '/v1/completions', `{"prompt": "x", "junk": ${'['.repeat(30000)}${']'.repeat(30000)}}`, 400, null, 'nested deeper than 256 levels'],
  ['deep nesting of objects', '/v1/chat/completions', `{"messages": [], "junk": ${'{"a":'.repeat(10000)}1${'}'.repeat(10000)}}`, 400, null, 'nested deeper than 256 levels'],
  ['deep nesting on /tokenize', '/tokenize', `{"prompt": "x", "junk": ${'['.repeat(30000)}${']'.repeat(30000)}}`, 400, null, 'nested deeper than 256 levels'],
  ['stream refused at admission', '/v1/completions', C({ prompt: [1, 200000], stream: true }), 400, 'prompt', 'outside the vocabulary'],
];

async function send([name, path, body, status, param, fragment, headers = {}], base) {
  const h = { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, ...headers };
  for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
  const res = await fetch(base + path, { method: 'POST', headers: h, body });
  const text = await res.text();
  let j;
  try { j = JSON.parse(text); } catch { throw new Error(`FAIL: ${name}: body is not JSON: ${text.slice(0, 200)}`); }
  eq(res.status, status, `${name}: status`);
  check(j.error && typeof j.error.message === 'string' && typeof j.error.type === 'string' && 'param' in j.error && 'code' in j.error,
    `${name}: OpenAI error shape: ${text.slice(0, 300)}`);
  eq(Object.keys(j.error), ['message', 'type', 'param', 'code'], `${name}: error keys`);
  eq(j.error.param, param, `${name}: param (${j.error.message})`);
  check(j.error.message.includes(fragment), `${name}: message ${JSON.stringify(j.error.message)} lacks ${JSON.stringify(fragment)}`);
}

run(async () => {
  const s = await startServer(['--max-body-bytes', String(LIMIT)], { apiKey: KEY });
  const c = s.client;
  try {
    check(corpus.length >= 40, `corpus has ${corpus.length} cases`);
    const good = { model: MODEL, prompt: 'A long story:', max_tokens: 200, ignore_eos: true, temperature: 0.8, seed: 5 };
    const want = (await c.completions.create(good)).choices[0].text;
    // The good request streams while the whole corpus hits the server at once.
    const goodRun = (async () => {
      let text = '';
      for await (const ch of await c.completions.create({ ...good, stream: true })) text += ch.choices[0]?.text ?? '';
      return text;
    })();
    await Promise.all(corpus.map((k) => send(k, s.base)));
    // ... and once more one by one, now that nothing else runs.
    for (const k of corpus) await send(k, s.base);
    eq(await goodRun, want, 'the concurrent good request is unaffected');
    check(s.alive(), 'server alive');
    const health = await fetch(`${s.base}/health`);
    eq(health.status, 200, 'health after the corpus');
    const after = await c.completions.create({ ...good, max_tokens: 20 });
    eq(after.usage.completion_tokens, 20, 'still serving');
    console.log(`${corpus.length} bad requests, each twice`);
  } finally {
    await s.stop();
  }
});
