// The tool-call parsers llama3_json, mistral and pythonic and the reasoning parser deepseek_r1 end
// to end, with the official `openai` client, each on a scripted model of its family
// (script_model.mjs) whose greedy answer to any chat prompt is that format:
//   llama3_json  Llama 3 tokenizer:  {"name":"get_weather","parameters":{"city":"Zürich"}}<|eot_id|>
//   pythonic     Llama 3 tokenizer:  [get_weather(city='Zürich', days=[1, 2]), now()]<|eot_id|>
//   mistral      Mistral tokenizer:  Checking.[TOOL_CALLS][{"name":"get_weather","arguments":{...}}]</s>
//   deepseek_r1  Qwen3 tokenizer:    REASONING</think>CONTENT<|im_end|> (no <think>: the template's)
// Streamed and not, the SDK sees the same message: tool_calls (ids as vLLM makes them, arguments
// JSON strings), content before the calls, finish_reason "tool_calls"; with tool_choice none the
// raw text; tool_choice naming a function constrains llama3_json output to its call (required
// and named are refused for mistral and pythonic). Unknown parser names are refused at start.
import fs from 'node:fs';
import { check, eq, run, startServer } from './harness.mjs';
import { writeScriptModel } from './script_model.mjs';

const TOOLS = ['get_weather', 'now'].map((name) => ({ type: 'function', function: { name, parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'array' } } } } }));
const USER = [{ role: 'user', content: 'What is the weather in Zürich?' }];
const HEX_ID = /^chatcmpl-tool-[0-9a-f]{32}$/, MISTRAL_ID = /^[A-Za-z0-9]{9}$/;

// Streams a chat completion, accumulating the deltas as the SDKs do (tool calls by index: id,
// type and name from their first fragment, arguments concatenated).
async function accumulate(stream) {
  const r = { content: '', reasoning: '', calls: [], finish: null, firstFragments: [] };
  for await (const ch of stream) {
    for (const c of ch.choices) {
      const d = c.delta ?? {};
      r.content += d.content ?? '';
      r.reasoning += d.reasoning_content ?? '';
      for (const t of d.tool_calls ?? []) {
        if (!r.calls[t.index]) r.firstFragments[t.index] = t;
        const call = (r.calls[t.index] ??= { id: '', type: '', function: { name: '', arguments: '' } });
        if (t.id) call.id = t.id;
        if (t.type) call.type = t.type;
        if (t.function?.name) call.function.name += t.function.name;
        if (t.function?.arguments) call.function.arguments += t.function.arguments;
      }
      if (c.finish_reason) r.finish = c.finish_reason;
    }
  }
  return r;
}

// `expected`: [[name, arguments as vLLM writes them], ...].
function checkCalls(calls, expected, idPattern, what) {
  eq(calls.length, expected.length, `${what}: ${expected.length} tool call(s)`);
  expected.forEach(([name, args], i) => {
    check(idPattern.test(calls[i].id), `${what}: call ${i} id ${calls[i].id}`);
    eq(calls[i].type, 'function', `${what}: call ${i} type`);
    eq(calls[i].function.name, name, `${what}: call ${i} name`);
    eq(calls[i].function.arguments, args, `${what}: call ${i} arguments`);
    eq(JSON.parse(calls[i].function.arguments), JSON.parse(args), `${what}: call ${i} arguments parse`);
  });
  check(new Set(calls.map((c) => c.id)).size === calls.length, `${what}: distinct ids`);
}

// One family and parser: the scripted answer through the server, not streamed and streamed.
async function toolCase({ family, after, script, parser, calls, content, idPattern, raw, forced = false }) {
  const { dir } = writeScriptModel({ A: script }, [[after, 'A']], family);
  const s = await startServer(['--enable-auto-tool-choice', '--tool-call-parser', parser], { modelDir: dir, dummy: false });
  const chat = { model: 'tiny-qwen3', messages: USER, tools: TOOLS, temperature: 0 };
  try {
    const r = await s.client.chat.completions.create(chat);
    const m = r.choices[0].message;
    eq(m.content, content, `${parser}: content`);
    checkCalls(m.tool_calls, calls, idPattern, `${parser} non-streamed`);
    eq(r.choices[0].finish_reason, 'tool_calls', `${parser}: finish_reason`);

    const st = await accumulate(await s.client.chat.completions.create({ ...chat, stream: true }));
    eq(st.content, content ?? '', `${parser} streamed: content`);
    checkCalls(st.calls, calls, idPattern, `${parser} streamed`);
    eq(st.finish, 'tool_calls', `${parser} streamed: finish_reason`);
    st.firstFragments.forEach((f, i) => {
      eq(Object.keys(f).sort(), ['function', 'id', 'index', 'type'], `${parser} streamed: call ${i} opens with index, id, type, function`);
      eq(f.function.name, calls[i][0], `${parser} streamed: call ${i} name first`);
    });
    const helper = await s.client.chat.completions.stream({ ...chat, stream: true }).finalChatCompletion();
    checkCalls(helper.choices[0].message.tool_calls, calls, idPattern, `${parser} SDK stream helper`);

    // tool_choice none: no parser, the model's text as it is (special tokens skipped).
    const none = await s.client.chat.completions.create({ ...chat, tool_choice: 'none' });
    eq([none.choices[0].message.tool_calls ?? [], none.choices[0].finish_reason], [[], 'stop'], `${parser}: tool_choice none parses nothing`);
    eq(none.choices[0].message.content, raw, `${parser}: tool_choice none, the raw text`);

    // tool_choice naming a function / "required": the output constrained to this format's calls
    // (hermes and llama3_json), else a 400 saying which parsers can.
    const UNIT = { type: 'function', function: { name: 'set_unit', parameters: { type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'], additionalProperties: false } } };
    const named = { ...chat, tools: [...TOOLS, UNIT], tool_choice: { type: 'function', function: { name: 'set_unit' } }, max_tokens: 64 };
    if (forced) {
      const f = await s.client.chat.completions.create(named);
      const fc = f.choices[0].message.tool_calls ?? [];
      eq([fc.length, fc[0]?.function.name, f.choices[0].finish_reason], [1, 'set_unit', 'tool_calls'], `${parser}: named tool_choice calls it`);
      check(['c', 'f'].includes(JSON.parse(fc[0].function.arguments).unit), `${parser}: forced arguments valid: ${fc[0].function.arguments}`);
      const fs2 = await accumulate(await s.client.chat.completions.create({ ...named, stream: true }));
      eq([fs2.calls.length, fs2.calls[0]?.function.name, fs2.finish], [1, 'set_unit', 'tool_calls'], `${parser}: named tool_choice, streamed`);
    } else {
      for (const tc of ['required', named.tool_choice]) {
        const r = await fetch(`${s.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...named, tool_choice: tc }) });
        const b = await r.json();
        eq([r.status, b.error?.param], [400, 'tool_choice'], `${parser}: tool_choice ${JSON.stringify(tc)} refused`);
        check(/hermes or llama3_json/.test(b.error?.message), `${parser}: the refusal names the parsers that can`);
      }
    }
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function deepseekCase() {
  const REASONING = 'Okay, the user greets me.\n', CONTENT = '\n\nHello there!';
  const script = [{ text: REASONING }, { special: '</think>' }, { text: CONTENT }, { special: '<|im_end|>' }];
  const { dir, tokens } = writeScriptModel({ A: script }, [['\n', 'A']], 'qwen3');
  const s = await startServer(['--reasoning-parser', 'deepseek_r1'], { modelDir: dir, dummy: false });
  const chat = { model: 'tiny-qwen3', messages: [{ role: 'user', content: 'Hi' }], temperature: 0 };
  try {
    const r = await s.client.chat.completions.create(chat);
    eq([r.choices[0].message.reasoning_content, r.choices[0].message.content], [REASONING, CONTENT], 'deepseek_r1: reasoning without <think>, then content');
    eq(r.usage.completion_tokens, tokens.A.length, 'deepseek_r1: the whole script');
    const st = await accumulate(await s.client.chat.completions.create({ ...chat, stream: true }));
    eq([st.reasoning, st.content, st.finish], [REASONING, CONTENT, 'stop'], 'deepseek_r1 streamed');
    // Cut before </think>: all reasoning, no content (vLLM's DeepSeekR1ReasoningParser).
    const cut = await s.client.chat.completions.create({ ...chat, max_tokens: 3 });
    const cm = cut.choices[0].message;
    check(cm.reasoning_content.length > 0 && REASONING.startsWith(cm.reasoning_content), `deepseek_r1 cut: reasoning ${JSON.stringify(cm.reasoning_content)}`);
    eq([cm.content, cut.choices[0].finish_reason], [null, 'length'], 'deepseek_r1 cut: no content');
    const cutSt = await accumulate(await s.client.chat.completions.create({ ...chat, max_tokens: 3, stream: true }));
    eq([cutSt.reasoning, cutSt.content], [cm.reasoning_content, ''], 'deepseek_r1 cut, streamed');
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function refusedAtStart(flags, names) {
  try {
    const s = await startServer(flags);
    await s.stop();
    check(false, `${flags.join(' ')}: server started`);
  } catch (e) {
    check(e.message.includes(names), `${flags.join(' ')}: refused listing ${names}: ${e.message.split('\n').slice(-3).join(' ')}`);
  }
}

run(async () => {
  const WEATHER = '{"city": "Zürich"}';
  await toolCase({ family: 'llama3', after: '\n\n', parser: 'llama3_json',
    script: [{ text: '{"name":"get_weather","parameters":{"city":"Zürich"}}' }, { special: '<|eot_id|>' }],
    calls: [['get_weather', WEATHER]], content: null, idPattern: HEX_ID, raw: '{"name":"get_weather","parameters":{"city":"Zürich"}}', forced: true });
  const py = "[get_weather(city='Zürich', days=[1, 2]), now()]";
  await toolCase({ family: 'llama3', after: '\n\n', parser: 'pythonic', script: [{ text: py }, { special: '<|eot_id|>' }],
    calls: [['get_weather', '{"city": "Zürich", "days": [1, 2]}'], ['now', '{}']], content: null, idPattern: HEX_ID, raw: py });
  const mistralCalls = '[{"name":"get_weather","arguments":{"city":"Zürich"}}]';
  await toolCase({ family: 'mistral', after: '[/INST]', parser: 'mistral',
    script: [{ text: 'Checking.' }, { special: '[TOOL_CALLS]' }, { text: mistralCalls }, { special: '</s>' }],
    calls: [['get_weather', WEATHER]], content: 'Checking.', idPattern: MISTRAL_ID,
    raw: 'Checking.' + mistralCalls });  // skip_special_tokens drops [TOOL_CALLS] without the parser
  await deepseekCase();
  await refusedAtStart(['--tool-call-parser', 'jamba'], 'hermes, llama3_json, mistral, pythonic');
  await refusedAtStart(['--reasoning-parser', 'granite'], 'deepseek_r1, qwen3');
}, 110000);
