// The official `openai` npm client against `nanovllm serve`: completions (string, batch, token
// ids), chat, streaming (chunks reassemble to the non-streamed text), stop strings, seeds, usage,
// models, tokenize/detokenize.
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';
const JSON_HEADERS = { 'content-type': 'application/json' };

async function streamText(stream) {
  const parts = {}; let finish = null; let usage = null; let first = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      first ??= c;
      const t = c.delta ? (c.delta.content ?? '') : c.text;
      parts[c.index] = (parts[c.index] ?? '') + t;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text: parts[0] ?? '', parts, finish, usage, first };
}

run(async () => {
  const s = await startServer();
  const c = s.client;
  try {
    const models = await c.models.list();
    eq(models.data.map((m) => m.id), [MODEL], 'models');

    // Completions, greedy: streamed text equals non-streamed text; usage adds up.
    const req = { model: MODEL, prompt: 'The capital of France is', max_tokens: 12, temperature: 0 };
    const a = await c.completions.create(req);
    eq(a.object, 'text_completion', 'completion object');
    eq(a.choices[0].finish_reason, 'length', 'finish length');
    const tok = await (await fetch(`${s.base}/tokenize`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ prompt: req.prompt }) })).json();
    eq(a.usage, { prompt_tokens: tok.count, completion_tokens: 12, total_tokens: tok.count + 12 }, 'completion usage');
    const as = await streamText(await c.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    eq(as.text, a.choices[0].text, 'streamed == non-streamed (completions, greedy)');
    eq(as.finish, 'length', 'streamed finish');
    eq(as.usage, a.usage, 'streamed usage');
    const detok = await (await fetch(`${s.base}/detokenize`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ tokens: tok.tokens }) })).json();
    eq(detok.prompt, req.prompt, 'detokenize(tokenize(x)) == x');

    // Token-id prompts give the same as the text prompt; a batch gives one choice per prompt.
    const ids = await c.completions.create({ ...req, prompt: tok.tokens });
    eq(ids.choices[0].text, a.choices[0].text, 'token-id prompt == text prompt');
    const batch = await c.completions.create({ ...req, prompt: [req.prompt, 'Hello there', req.prompt] });
    eq(batch.choices.length, 3, 'batch choices');
    eq(batch.choices[2].text, a.choices[0].text, 'batch choice 2');
    eq(batch.choices.map((x) => x.index), [0, 1, 2], 'batch indices');

    // Seeds: same seed, same text; a different seed (almost surely) differs.
    const sampled = { model: MODEL, prompt: 'Once upon a time', max_tokens: 24, temperature: 1.0, top_p: 0.95, top_k: 50 };
    const s1 = await c.completions.create({ ...sampled, seed: 7 });
    const s2 = await c.completions.create({ ...sampled, seed: 7 });
    const s3 = await c.completions.create({ ...sampled, seed: 8 });
    eq(s2.choices[0].text, s1.choices[0].text, 'same seed, same text');
    check(s3.choices[0].text !== s1.choices[0].text, 'different seed, different text');
    const s1s = await streamText(await c.completions.create({ ...sampled, seed: 7, stream: true }));
    eq(s1s.text, s1.choices[0].text, 'same seed streamed == non-streamed');

    // Stop strings: cut before the first occurrence, finish_reason "stop", streamed the same.
    const full = s1.choices[0].text;
    const stop = [...full].slice(6, 8).join('');
    const cut = full.slice(0, full.indexOf(stop));
    const st = await c.completions.create({ ...sampled, seed: 7, stop });
    eq(st.choices[0].text, cut, `stop string ${JSON.stringify(stop)}`);
    eq(st.choices[0].finish_reason, 'stop', 'stop finish reason');
    const sts = await streamText(await c.completions.create({ ...sampled, seed: 7, stop: [stop, 'zzzz-never'], stream: true }));
    eq(sts.text, cut, 'streamed stop string');
    eq(sts.finish, 'stop', 'streamed stop finish');

    // Chat: non-stream message, usage; stream opens with the role, reassembles to the same text.
    const chat = { model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }],
      max_tokens: 10, temperature: 0.7, seed: 3 };
    const ch = await c.chat.completions.create(chat);
    eq(ch.object, 'chat.completion', 'chat object');
    eq(ch.choices[0].message.role, 'assistant', 'chat role');
    check(ch.choices[0].message.content.length > 0, 'chat content');
    eq(ch.usage.completion_tokens, 10, 'chat completion tokens');
    const chs = await streamText(await c.chat.completions.create({ ...chat, stream: true, stream_options: { include_usage: true } }));
    eq(chs.first.delta.role, 'assistant', 'first chunk carries the role');
    eq(chs.text, ch.choices[0].message.content, 'chat streamed == non-streamed');
    eq(chs.usage, ch.usage, 'chat streamed usage');
    eq(chs.finish, 'length', 'chat streamed finish');
    // The prompt is the chat template's: /tokenize with messages counts the same tokens.
    const ctok = await (await fetch(`${s.base}/tokenize`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ messages: chat.messages }) })).json();
    eq(ch.usage.prompt_tokens, ctok.count, 'chat prompt tokens == /tokenize(messages)');
    // enable_thinking=false renders an empty think block: more prompt tokens.
    const nothink = await c.chat.completions.create({ ...chat, chat_template_kwargs: { enable_thinking: false } });
    check(nothink.usage.prompt_tokens > ch.usage.prompt_tokens, 'enable_thinking=false changes the prompt');
    // Tools reach the template (tool_choice "none": this server has no --enable-auto-tool-choice,
    // so the default "auto" is refused, as by vLLM).
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const withTools = await c.chat.completions.create({ ...chat, tools, tool_choice: 'none' });
    check(withTools.usage.prompt_tokens > ch.usage.prompt_tokens + 20, 'tools rendered into the prompt');
    // Text content parts are accepted.
    const parts = await c.chat.completions.create({ ...chat, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi!' }] }] });
    check(parts.choices[0].message.content.length > 0, 'content parts');

    // stop_token_ids and ignore_eos pass through: stopping on the greedy token ends at once.
    const g1 = await c.completions.create({ ...req, max_tokens: 1 });
    const firstId = (await (await fetch(`${s.base}/tokenize`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ prompt: g1.choices[0].text }) })).json()).tokens[0];
    const sti = await c.completions.create({ ...req, stop_token_ids: [firstId] });
    eq(sti.usage.completion_tokens, 1, 'stop_token_ids ends after that token');
    eq(sti.choices[0].finish_reason, 'stop', 'stop_token_ids finish reason');

    const m = await metrics(s.base);
    eq(m['vllm:num_requests_running'], 0, 'nothing running at the end');
    check(m['vllm:generation_tokens_total'] > 100, 'generation tokens counted');
    check(m['vllm:time_to_first_token_seconds_count'] > 10, 'ttft observed');
  } finally {
    await s.stop();
  }
});
