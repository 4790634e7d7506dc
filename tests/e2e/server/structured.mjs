// Structured outputs end to end with the official `openai` client (issue 42): on the tiny Qwen3
// model with random weights (the real Qwen3 tokenizer), every constrained output is valid for its
// constraint whatever the weights say: response_format json_schema (streamed and not: the content
// parses and ajv accepts it), structured_outputs regex and choice, guided_json, a schema the
// compiler refuses (a 400 naming response_format), tool_choice "required" and a named function with
// --tool-call-parser hermes (tool_calls whose arguments ajv accepts), and a reasoning model
// (--reasoning-parser qwen3, a scripted model that thinks first): the reasoning is the script's,
// unconstrained, the content valid JSON.
// Needs the engine's grammar wiring (masks in the sampler, EOS when the grammar is done): it fails
// on a tree without it.
import fs from 'node:fs';
import path from 'node:path';
import { SRC, check, eq, run, startServer } from './harness.mjs';
import { writeScriptModel } from './script_model.mjs';

const Ajv = (await import(path.join(SRC, 'tests/oracles/node_modules/ajv/dist/ajv.js'))).default;
const ajv = new Ajv({ strict: false });

// Bounded schemas: any path through them ends within a few dozen tokens, so random weights finish.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pet: { enum: ['cat', 'dog', null] },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 },
  },
  required: ['name', 'age', 'pet'],
  additionalProperties: false,
};
const WEATHER = { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'], additionalProperties: false };
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: WEATHER } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['utc', 'cet'] } }, required: ['tz'], additionalProperties: false } } },
];
const USER = [{ role: 'user', content: 'Describe a person as JSON.' }];
const JSON_HEADERS = { 'content-type': 'application/json' };

function valid(schema, text, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { throw new Error(`FAIL: ${what}: not JSON: ${JSON.stringify(text)}`); }
  check(ajv.validate(schema, v), `${what}: ${text} against the schema: ${ajv.errorsText()}`);
  return v;
}

async function post(base, route, body) {
  const r = await fetch(`${base}${route}`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function streamed(stream) {
  let content = '', reasoning = '', finish = null;
  for await (const ch of stream)
    for (const c of ch.choices) {
      content += c.delta?.content ?? '';
      reasoning += c.delta?.reasoning_content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  return { content, reasoning, finish };
}

run(async () => {
  const s = await startServer(['--tool-call-parser', 'hermes']);
  const { dir, tokens } = writeScriptModel({ A: [{ special: '<think>' }, { text: 'Plan: a person.\n' }, { special: '</think>' },
    { text: 'Here you go' }, { special: '<|im_end|>' }] }, [['\n', 'A']]);
  const thinker = await startServer(['--reasoning-parser', 'qwen3'], { modelDir: dir, dummy: false });
  const c = s.client;
  const schemaFormat = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };
  try {
    // response_format json_schema, several seeds at temperature 1, and greedy.
    for (const seed of [1, 2, 3, 4]) {
      const r = await c.chat.completions.create({ messages: USER, response_format: schemaFormat, max_tokens: 300, temperature: 1, seed });
      eq(r.choices[0].finish_reason, 'stop', `json_schema seed ${seed}: the grammar ends the output`);
      valid(PERSON, r.choices[0].message.content, `json_schema seed ${seed}`);
      check(!/\n/.test(r.choices[0].message.content), `json_schema seed ${seed}: compact by default`);
    }
    const st = await streamed(await c.chat.completions.create({ messages: USER, response_format: schemaFormat, max_tokens: 300, temperature: 0.8, seed: 9, stream: true }));
    eq(st.finish, 'stop', 'streamed json_schema: finish_reason');
    valid(PERSON, st.content, 'streamed json_schema');
    const obj = await c.chat.completions.create({ messages: USER, response_format: { type: 'json_object' }, max_tokens: 300, temperature: 0 });
    if (obj.choices[0].finish_reason === 'stop') check(typeof JSON.parse(obj.choices[0].message.content) === 'object', 'json_object');

    // structured_outputs regex and choice, guided_json; completions too.
    const re = /^[a-z]{2,6}@example\.(com|org)$/;
    for (const seed of [1, 2, 3]) {
      const r = await c.completions.create({ model: 'tiny-qwen3', prompt: 'Email:', max_tokens: 40, temperature: 1, seed, structured_outputs: { regex: '[a-z]{2,6}@example\\.(com|org)' } });
      check(re.test(r.choices[0].text), `regex seed ${seed}: ${JSON.stringify(r.choices[0].text)}`);
    }
    const choices = ['red', 'green', 'dark blue'];
    for (const seed of [1, 2, 3]) {
      const r = await c.chat.completions.create({ messages: USER, max_tokens: 10, temperature: 1, seed, structured_outputs: { choice: choices } });
      check(choices.includes(r.choices[0].message.content), `choice seed ${seed}: ${r.choices[0].message.content}`);
    }
    const g = await c.completions.create({ model: 'tiny-qwen3', prompt: 'JSON:', max_tokens: 100, temperature: 1, seed: 5, guided_json: WEATHER });
    valid(WEATHER, g.choices[0].text, 'guided_json');
    const n = await c.chat.completions.create({ messages: USER, n: 3, max_tokens: 300, temperature: 1, seed: 11, response_format: schemaFormat });
    for (const ch of n.choices) valid(PERSON, ch.message.content, `n = 3, choice ${ch.index}`);

    // A schema the compiler refuses: a 400 naming the field the user set.
    const bad = await post(s.base, '/v1/chat/completions', { messages: USER, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} }, unsupportedKeyword: 1, $ref: '#/nowhere' } } } });
    eq([bad.status, bad.body.error?.param], [400, 'response_format'], 'an uncompilable schema');

    // tool_choice required and named: the output is hermes tool calls the parser turns into tool_calls.
    for (const [tc, names] of [['required', ['get_weather', 'get_time']], [{ type: 'function', function: { name: 'get_weather' } }, ['get_weather']]]) {
      for (const seed of [1, 2]) {
        const r = await c.chat.completions.create({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: TOOLS, tool_choice: tc, max_tokens: 200, temperature: 1, seed });
        const m = r.choices[0].message, what = `tool_choice ${JSON.stringify(tc)} seed ${seed}`;
        eq(r.choices[0].finish_reason, 'tool_calls', `${what}: finish_reason`);
        check(m.tool_calls?.length >= 1, `${what}: tool calls`);
        if (typeof tc === 'object') eq(m.tool_calls.length, 1, `${what}: exactly one call`);
        for (const call of m.tool_calls) {
          check(names.includes(call.function.name), `${what}: ${call.function.name}`);
          valid(TOOLS.find((t) => t.function.name === call.function.name).function.parameters, call.function.arguments, `${what}: arguments`);
        }
      }
    }

    // A reasoning model: the reasoning is the script's own text, the content valid JSON.
    for (const stream of [false, true]) {
      const req = { model: 'tiny-qwen3', messages: USER, response_format: schemaFormat, max_tokens: 300, temperature: 0 };
      const r = stream ? await streamed(await thinker.client.chat.completions.create({ ...req, stream: true }))
        : (({ message: m, finish_reason }) => ({ content: m.content, reasoning: m.reasoning_content, finish: finish_reason }))((await thinker.client.chat.completions.create(req)).choices[0]);
      eq(r.reasoning, 'Plan: a person.\n', `reasoning (stream ${stream}): unconstrained`);
      valid(PERSON, r.content, `content after the reasoning (stream ${stream})`);
    }
    // enable_thinking=false: the prompt closes the reasoning; the content is constrained from its first token.
    const off = await thinker.client.chat.completions.create({ messages: USER, response_format: schemaFormat, max_tokens: 300, temperature: 0, chat_template_kwargs: { enable_thinking: false } });
    valid(PERSON, off.choices[0].message.content, 'enable_thinking=false');
    check(tokens.A.length > 0, 'script written');
  } finally {
    await s.stop();
    await thinker.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 170000);
