// Reasoning and tool calls end to end, with the official `openai` client, on a scripted model
// (script_model.mjs): its greedy answer to any chat prompt is
//   <think>REASONING</think>CONTENT<tool_call>CALL</tool_call><|im_end|>
// so reasoning_content, content and tool_calls are known exactly, streamed or not. Also: the
// tool-call turn the SDK sends back renders as @huggingface/jinja renders it, tool_choice none (and
// required / named refused without --tool-call-parser), enable_thinking=false, stop strings with include_stop_str_in_output,
// continuous_usage_stats, request ids, a request's own chat_template and the field audit.
import fs from 'node:fs';
import path from 'node:path';
import { SRC, check, eq, run, startServer } from './harness.mjs';
import { ARGS, CALL, CONTENT, REASONING, SCRIPT, writeScriptModel } from './script_model.mjs';

const { Template } = await import(path.join(SRC, 'tests/oracles/node_modules/@huggingface/jinja/dist/index.js'));
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } } }];
const USER = [{ role: 'user', content: 'What is the weather in Paris?' }];
const JSON_HEADERS = { 'content-type': 'application/json' };

// Streams a chat completion, accumulating the deltas as the SDKs do (tool calls by index: id,
// type and name from their first fragment, arguments concatenated).
async function accumulate(stream) {
  const r = { content: '', reasoning: '', calls: [], finish: null, chunks: [] };
  for await (const ch of stream) {
    r.chunks.push(ch);
    for (const c of ch.choices) {
      const d = c.delta ?? {};
      r.content += d.content ?? '';
      r.reasoning += d.reasoning_content ?? '';
      for (const t of d.tool_calls ?? []) {
        const call = (r.calls[t.index] ??= { id: '', type: '', name: '', arguments: '' });
        if (t.id) call.id = t.id;
        if (t.type) call.type = t.type;
        if (t.function?.name) call.name += t.function.name;
        if (t.function?.arguments) call.arguments += t.function.arguments;
      }
      if (c.finish_reason) r.finish = c.finish_reason;
    }
  }
  return r;
}

function checkCall(call, what) {
  check(/^chatcmpl-tool-[0-9a-f]{32}$/.test(call.id), `${what}: tool call id ${call.id}`);
  eq(call.type, 'function', `${what}: type`);
  eq(call.function?.name ?? call.name, 'get_weather', `${what}: name`);
  const args = call.function?.arguments ?? call.arguments;
  eq(args, '{"city": "Paris", "unit": "celsius"}', `${what}: arguments as vLLM writes them`);
  eq(JSON.parse(args), ARGS, `${what}: arguments parse`);
}

async function post(base, route, body, headers = {}) {
  const r = await fetch(`${base}${route}`, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

run(async () => {
  const { dir, tokens } = writeScriptModel({ A: SCRIPT }, [['\n', 'A']]);
  const flags = ['--reasoning-parser', 'qwen3', '--enable-auto-tool-choice', '--tool-call-parser', 'hermes'];
  const s = await startServer(flags, { modelDir: dir, dummy: false });
  const plain = await startServer([], { modelDir: dir, dummy: false });
  const c = s.client;
  const chat = { model: 'tiny-qwen3', messages: USER, tools: TOOLS, temperature: 0 };
  try {
    // Not streamed: every part exactly.
    const r = await c.chat.completions.create(chat);
    const m = r.choices[0].message;
    eq(m.reasoning_content, REASONING, 'reasoning_content');
    eq(m.content, CONTENT, 'content');
    eq(m.tool_calls.length, 1, 'one tool call');
    checkCall(m.tool_calls[0], 'non-streamed');
    eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    eq(r.usage.completion_tokens, tokens.A.length, 'completion tokens: the script, EOS included');

    // Streamed: the same parts, tool calls in fragments the SDK accumulates; the SDK's own stream
    // helper agrees.
    const st = await accumulate(await c.chat.completions.create({ ...chat, stream: true }));
    eq(st.reasoning, REASONING, 'streamed reasoning_content');
    eq(st.content, CONTENT, 'streamed content');
    eq(st.calls.length, 1, 'streamed: one tool call');
    checkCall(st.calls[0], 'streamed');
    eq(st.finish, 'tool_calls', 'streamed finish_reason');
    const first = st.chunks.find((ch) => ch.choices[0]?.delta?.tool_calls);
    eq(Object.keys(first.choices[0].delta.tool_calls[0]).sort(), ['function', 'id', 'index', 'type'], 'first fragment: index, id, type, function');
    eq(first.choices[0].delta.tool_calls[0].function, { name: 'get_weather', arguments: '' }, 'first fragment: the name');
    const helper = await c.chat.completions.stream({ ...chat, stream: true }).finalChatCompletion();
    eq(helper.choices[0].message.content, CONTENT, 'SDK stream helper: content');
    checkCall(helper.choices[0].message.tool_calls[0], 'SDK stream helper');
    eq(helper.choices[0].finish_reason, 'tool_calls', 'SDK stream helper: finish_reason');

    // The next turn, as the SDK sends it: the assistant message with content null and its
    // tool_calls (arguments a JSON string), then the tool's answer. Rendered as @huggingface/jinja
    // renders it.
    const turn = [...USER, { role: 'assistant', content: null, tool_calls: m.tool_calls },
      { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '{"temperature": 21}' }];
    const r2 = await c.chat.completions.create({ ...chat, messages: turn });
    eq(r2.choices[0].message.reasoning_content, REASONING, 'tool turn answered');
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    // vLLM hands the template "" for a null content and the arguments as objects.
    const refMessages = turn.map((x) => (x.tool_calls ? { ...x, content: '', tool_calls: x.tool_calls.map((t) => ({ ...t, function: { ...t.function, arguments: JSON.parse(t.function.arguments) } })) } : x));
    const ref = new Template(cfg.chat_template).render({ messages: refMessages, tools: TOOLS, add_generation_prompt: true, bos_token: '', eos_token: '<|im_end|>' });
    check(ref.includes('<tool_response>\n{"temperature": 21}\n</tool_response>') && ref.includes('"city": "Paris"'), 'reference renders the turn');
    const ours = await post(s.base, '/tokenize', { messages: turn, tools: TOOLS });
    const refIds = await post(s.base, '/tokenize', { prompt: ref });
    eq(ours.body.tokens, refIds.body.tokens, 'tool turn renders as @huggingface/jinja');
    eq(r2.usage.prompt_tokens, ours.body.count, 'tool turn prompt tokens');

    // tool_choice none: no parsing of calls, the block is text; reasoning still parsed.
    const none = await c.chat.completions.create({ ...chat, tool_choice: 'none' });
    eq(none.choices[0].message.content, CONTENT + '<tool_call>' + CALL + '</tool_call>', 'tool_choice none: plain text');
    eq(none.choices[0].message.tool_calls ?? [], [], 'tool_choice none: no tool_calls');
    eq(none.choices[0].finish_reason, 'stop', 'tool_choice none: finish_reason stop');
    // required and a named function need --tool-call-parser hermes (test_server_structured.sh runs them).
    for (const tc of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
      const e = await post(plain.base, '/v1/chat/completions', { ...chat, tool_choice: tc });
      eq([e.status, e.body.error?.param], [400, 'tool_choice'], `tool_choice ${JSON.stringify(tc)} refused`);
      check(/--tool-call-parser hermes/.test(e.body.error.message), `tool_choice ${JSON.stringify(tc)}: says why`);
    }
    // Without --enable-auto-tool-choice, tools (tool_choice auto by default) are a 400, as in vLLM.
    const noAuto = await post(plain.base, '/v1/chat/completions', chat);
    eq([noAuto.status, noAuto.body.error?.param], [400, 'tool_choice'], 'auto without --enable-auto-tool-choice');
    check(/--enable-auto-tool-choice/.test(noAuto.body.error.message), 'auto refusal names the flag');
    const raw = await plain.client.chat.completions.create({ ...chat, tool_choice: 'none' });
    eq(raw.choices[0].message.content, '<think>' + REASONING + '</think>' + CONTENT + '<tool_call>' + CALL + '</tool_call>', 'no parsers: the raw text');

    // Thinking disabled in the template: the model's output is content (and the call is parsed).
    const off = await c.chat.completions.create({ ...chat, chat_template_kwargs: { enable_thinking: false } });
    eq(off.choices[0].message.reasoning_content, null, 'enable_thinking=false: no reasoning');
    eq(off.choices[0].message.content, 'Let me check:\n', 'enable_thinking=false: content');
    checkCall(off.choices[0].message.tool_calls[0], 'enable_thinking=false');

    // Stop strings act on the model's text; include_stop_str_in_output keeps the stop string.
    const cut = await c.chat.completions.create({ ...chat, stop: ['Paris'] });
    eq([cut.choices[0].message.reasoning_content, cut.choices[0].message.content, cut.choices[0].finish_reason],
      ['The user wants the weather in ', null, 'stop'], 'stop string in the reasoning');
    const keep = await c.chat.completions.create({ ...chat, stop: ['check'], include_stop_str_in_output: true });
    eq([keep.choices[0].message.reasoning_content, keep.choices[0].message.content, keep.choices[0].finish_reason],
      [REASONING, '\n\nLet me check', 'stop'], 'include_stop_str_in_output');
    const keepSt = await accumulate(await c.chat.completions.create({ ...chat, stop: ['check'], include_stop_str_in_output: true, stream: true }));
    eq([keepSt.reasoning, keepSt.content, keepSt.finish], [REASONING, '\n\nLet me check', 'stop'], 'include_stop_str_in_output, streamed');
    eq(keepSt.calls, [], 'stopped before the call');

    // continuous_usage_stats: usage in every chunk, growing to the final count.
    const cu = await accumulate(await c.chat.completions.create({ ...chat, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }));
    check(cu.chunks.every((ch) => ch.usage && ch.usage.prompt_tokens === r.usage.prompt_tokens), 'usage in every chunk');
    const counts = cu.chunks.map((ch) => ch.usage.completion_tokens);
    check(counts.every((n, i) => i === 0 || n >= counts[i - 1]), 'completion_tokens never decrease');
    eq(counts[counts.length - 1], tokens.A.length, 'last chunk: all tokens');
    const once = await accumulate(await c.chat.completions.create({ ...chat, stream: true, stream_options: { include_usage: true } }));
    eq(once.chunks.filter((ch) => ch.usage).length, 1, 'include_usage alone: one usage chunk');

    // Request ids: the body's request_id, or the X-Request-Id header over it.
    eq((await post(s.base, '/v1/chat/completions', { ...chat, request_id: 'abc123' })).body.id, 'chatcmpl-abc123', 'request_id');
    eq((await post(s.base, '/v1/chat/completions', { ...chat, request_id: 'abc' }, { 'x-request-id': 'hdr-7' })).body.id, 'chatcmpl-hdr-7', 'X-Request-Id');

    // A request's own chat_template.
    const own = await post(s.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2, chat_template: '{{ messages[0].content }} there' });
    eq([own.status, own.body.usage?.prompt_tokens], [200, 2], 'request chat_template renders "Hello there"');
    const badTpl = await post(s.base, '/v1/chat/completions', { messages: USER, chat_template: '{% for %}' });
    eq([badTpl.status, badTpl.body.error?.param], [400, 'chat_template'], 'a broken chat_template is a 400');

    // The field audit: unimplemented fields at non-default values are refused, defaults and
    // unknown fields pass (the unknown ones with a warning in the log).
    for (const [f, v] of [['structural_tag', '{}'],
      ['use_beam_search', true], ['priority', 1], ['logits_processors', ['x']], ['continue_final_message', true], ['reasoning_effort', 'low']]) {
      const e = await post(s.base, '/v1/chat/completions', { ...chat, tool_choice: 'none', [f]: v });
      eq([e.status, e.body.error?.param], [400, f], `${f} refused`);
    }
    const e = await post(s.base, '/v1/completions', { prompt: 'Hi', suffix: 'x' });
    eq([e.status, e.body.error?.param], [400, 'suffix'], 'suffix refused');
    const ok = await post(s.base, '/v1/chat/completions', { ...chat, max_tokens: 2, response_format: { type: 'text' }, use_beam_search: false, priority: 0, bad_words: [], some_future_field: 1 });
    eq(ok.status, 200, 'default values and unknown fields pass');
    check(/ignored: some_future_field/.test(s.log()), 'unknown field logged');
  } finally {
    await s.stop();
    await plain.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 150000);
