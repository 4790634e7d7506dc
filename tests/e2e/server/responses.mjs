// The Responses API (/v1/responses) end to end with the official `openai` client:
// - a scripted reasoning model (script_model.mjs) whose greedy answer is
//   <think>REASONING</think>CONTENT<tool_call>CALL</tool_call><|im_end|>, so the reasoning,
//   message and function_call items are known exactly: responses.create with instructions, the
//   same through responses.stream (every event a member of the SDK's ResponseStreamEvent union,
//   in the SDK's order, sequence numbers 0, 1, 2, ...; the SDK's accumulated final response equal
//   to the non-streamed one), GET, previous_response_id (the prompt equal, token for token, to the
//   chat rendering of the conversation: /tokenize is the reference);
// - the tiny random model: a function-tool round trip forced by tool_choice (function_call ->
//   function_call_output -> answer, with previous_response_id and with the items sent back),
//   text.format json_schema, max_output_tokens (status incomplete), cancel of a running response,
//   delete, store false, evicted ids (a small --responses-store-bytes), refused tool types.
import fs from 'node:fs';
import path from 'node:path';
import { SRC, check, eq, run, startServer } from './harness.mjs';
import { ARGS, CALL, CONTENT, REASONING, SCRIPT, writeScriptModel } from './script_model.mjs';

const WEATHER = { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'], additionalProperties: false };
const TOOL = { type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: WEATHER, strict: true };
const CHAT_TOOLS = [{ type: 'function', function: { name: TOOL.name, description: TOOL.description, parameters: WEATHER } }];
const JSON_HEADERS = { 'content-type': 'application/json' };

// The SDK's stream event types: every member of the ResponseStreamEvent union, by its type literal.
function sdkEventTypes() {
  const dts = fs.readFileSync(path.join(SRC, 'tests/oracles/node_modules/openai/resources/responses/responses.d.ts'), 'utf8');
  const union = dts.match(/export type ResponseStreamEvent = ([^;]+);/)[1].split('|').map((s) => s.trim());
  const types = new Set();
  for (const name of union) {
    const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))?.[1] ?? '';
    const lit = body.match(/\n    type: '([a-z_.]+)';/);
    if (lit) types.add(lit[1]);
  }
  check(types.size > 40 && types.has('response.output_text.delta'), `SDK event types read (${types.size})`);
  return types;
}

async function http(base, method, route, body) {
  const r = await fetch(`${base}${route}`, { method, headers: JSON_HEADERS, body: body && JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

async function tokenCount(base, messages, tools) {
  const r = await http(base, 'POST', '/tokenize', { messages, ...(tools ? { tools } : {}) });
  eq(r.status, 200, '/tokenize');
  return r.body.count;
}

async function refusedWith(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    eq(e.status, status, `${what}: status`);
    return e.error ?? e;
  }
  throw new Error(`FAIL: ${what}: not refused`);
}

function checkScripted(r, tokens, what) {
  eq(r.status, 'completed', `${what}: status`);
  eq(r.output.map((o) => o.type), ['reasoning', 'message', 'function_call'], `${what}: item types`);
  const [rs, msg, fc] = r.output;
  check(/^rs_[0-9a-f]{48}$/.test(rs.id) && /^msg_[0-9a-f]{48}$/.test(msg.id) && /^fc_[0-9a-f]{48}$/.test(fc.id), `${what}: item ids`);
  eq(rs.content, [{ type: 'reasoning_text', text: REASONING }], `${what}: reasoning`);
  eq(msg.content[0].text, CONTENT, `${what}: output_text`);
  eq(r.output_text, CONTENT, `${what}: the SDK's output_text`);
  eq([fc.name, JSON.parse(fc.arguments), fc.status], ['get_weather', ARGS, 'completed'], `${what}: function call`);
  check(/^call_[0-9a-f]{48}$/.test(fc.call_id), `${what}: call_id`);
  eq(r.usage.output_tokens, tokens.A.length, `${what}: output tokens`);
  eq(r.usage.output_tokens_details.reasoning_tokens, tokens.thinkEnd + 1, `${what}: reasoning tokens (through </think>)`);
  eq(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens, `${what}: total tokens`);
}

run(async () => {
  const { dir, tokens } = writeScriptModel({ A: SCRIPT }, [['\n', 'A']]);
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')).added_tokens;
  tokens.thinkEnd = tokens.A.indexOf(vocab.find((t) => t.content === '</think>').id);
  const [s, r] = await Promise.all([  // started together: loading is most of this test's time
    startServer(['--reasoning-parser', 'qwen3', '--enable-auto-tool-choice', '--tool-call-parser', 'hermes'], { modelDir: dir, dummy: false }),
    startServer(['--tool-call-parser', 'hermes', '--responses-store-bytes', '6000'])]);
  const types = sdkEventTypes();
  try {
    // responses.create with instructions: reasoning, message and function_call items.
    const input = 'What is the weather in Paris?';
    const a = await s.client.responses.create({ model: 'tiny-qwen3', input, instructions: 'Be brief.', tools: [TOOL], temperature: 0, metadata: { k: 'v' } });
    checkScripted(a, tokens, 'create');
    check(/^resp_[0-9a-f]{48}$/.test(a.id), 'response id');
    eq([a.object, a.instructions, a.metadata, a.tool_choice, a.store, a.model], ['response', 'Be brief.', { k: 'v' }, 'auto', true, 'tiny-qwen3'], 'echoed fields');
    eq(a.usage.input_tokens, await tokenCount(s.base, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: input }], CHAT_TOOLS),
      'the prompt is the chat rendering of instructions + input');

    // responses.stream: the SDK's events, in order, numbered; its final response as the created one.
    const stream = s.client.responses.stream({ model: 'tiny-qwen3', input, instructions: 'Be brief.', tools: [TOOL], temperature: 0 });
    const seen = [];
    for await (const e of stream) seen.push(e);
    const fin = await stream.finalResponse();
    for (const e of seen) check(types.has(e.type), `event ${e.type} is one of the SDK's`);
    eq(seen.map((e) => e.sequence_number), seen.map((_, i) => i), 'sequence numbers 0, 1, 2, ...');
    const order = seen.map((e) => e.type).filter((t, i, all) => !t.endsWith('.delta') || all[i - 1] !== t);
    eq(order, ['response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta', 'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
      'response.completed'], 'event order');
    eq(seen.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), CONTENT, 'text deltas add up');
    eq(seen.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join(''), REASONING, 'reasoning deltas add up');
    checkScripted(fin, tokens, 'stream');
    eq(fin.output.map((o) => o.id), seen.filter((e) => e.type === 'response.output_item.added').map((e) => e.item.id), 'item ids as announced');
    eq(fin.usage, a.usage, 'streamed usage');

    // GET: the stored response; previous_response_id: the earlier turn, then the new input.
    const got = await s.client.responses.retrieve(a.id);
    eq([got.id, got.status, got.output.map((o) => o.id)], [a.id, 'completed', a.output.map((o) => o.id)], 'retrieve: the stored response');
    const b = await s.client.responses.create({ input: 'And tomorrow?', previous_response_id: a.id, tools: [TOOL], temperature: 0 });
    eq(b.previous_response_id, a.id, 'previous_response_id echoed');
    const fc = a.output[2];
    const history = [{ role: 'user', content: input },
      { role: 'assistant', content: CONTENT, reasoning_content: REASONING, tool_calls: [{ id: fc.call_id, type: 'function', function: { name: fc.name, arguments: fc.arguments } }] },
      { role: 'user', content: 'And tomorrow?' }];
    eq(b.usage.input_tokens, await tokenCount(s.base, history, CHAT_TOOLS), 'previous_response_id: the conversation (not its instructions) comes first');

    // A function-tool round trip on the random model: the named tool_choice forces the call.
    const q = await r.client.responses.create({ input: 'Weather in Paris?', tools: [TOOL], tool_choice: { type: 'function', name: 'get_weather' }, temperature: 0, max_output_tokens: 200 });
    const call = q.output.find((o) => o.type === 'function_call');
    check(call && call.name === 'get_weather', 'forced tool_choice: a function_call item');
    const args = JSON.parse(call.arguments);
    check(typeof args.city === 'string' && ['c', 'f'].includes(args.unit), `arguments follow the schema: ${call.arguments}`);
    const output = { type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21}' };
    const turn = [{ role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'get_weather', arguments: call.arguments } }] },
      { role: 'tool', tool_call_id: call.call_id, content: output.output }];
    const want = await tokenCount(r.base, turn, CHAT_TOOLS);
    const answer = { tools: [TOOL], tool_choice: 'none', temperature: 0, max_output_tokens: 6, min_tokens: 6 };
    const ans = await r.client.responses.create({ ...answer, previous_response_id: q.id, input: [output] });
    eq(ans.usage.input_tokens, want, 'function_call_output after previous_response_id renders as the chat tool turn');
    eq([ans.status, ans.incomplete_details, ans.output.map((o) => o.type)], ['incomplete', { reason: 'max_output_tokens' }, ['message']], 'the answer, cut by max_output_tokens');
    const items = await r.client.responses.create({ ...answer, input: ['Weather in Paris?', call, output].map((x) => (typeof x === 'string' ? { role: 'user', content: x } : x)) });
    eq(items.usage.input_tokens, want, 'the same turn sent as items');
    eq(items.output[0].content[0].text, ans.output[0].content[0].text, 'the same answer');
    const unknown = await refusedWith(r.client.responses.create({ input: [{ type: 'function_call_output', call_id: 'call_nope', output: '1' }] }), 400, 'an output without its call');
    eq(unknown.param, 'input[0].call_id', 'names the item');

    // text.format json_schema: the structured-output path.
    const js = await r.client.responses.create({ input: 'Weather?', text: { format: { type: 'json_schema', name: 'w', schema: WEATHER, strict: true } }, temperature: 0, max_output_tokens: 100 });
    const v = JSON.parse(js.output_text);
    check(typeof v.city === 'string' && ['c', 'f'].includes(v.unit), `text.format json_schema: ${js.output_text}`);

    // Cancel a running response: its stream ends incomplete with status cancelled.
    const long = r.client.responses.stream({ input: 'Talk.', max_output_tokens: 3000, ignore_eos: true, temperature: 0 });
    let cancelled = null, last = null, cancelAnswer = null;
    for await (const e of long) {
      if (e.type === 'response.created') {
        cancelAnswer = await http(r.base, 'POST', `/v1/responses/${e.response.id}/cancel`);
        cancelled = e.response.id;
      }
      last = e;
    }
    eq([cancelAnswer.status, cancelAnswer.body.status], [200, 'cancelled'], 'cancel answers the response');
    eq([last.type, last.response.status], ['response.incomplete', 'cancelled'], 'the stream ends cancelled');
    check(last.response.usage.output_tokens < 3000, 'cancelled before the end');
    eq((await r.client.responses.retrieve(cancelled)).status, 'cancelled', 'stored as cancelled');
    const again = await http(r.base, 'POST', `/v1/responses/${cancelled}/cancel`);
    eq(again.status, 400, 'an ended response cannot be cancelled');

    // Delete; store false; refused tool types; unknown and evicted ids.
    const d = await r.client.responses.create({ input: 'x', max_output_tokens: 2 });
    eq(await r.client.responses.delete(d.id).then(() => 'deleted'), 'deleted', 'delete');
    const gone = await refusedWith(r.client.responses.retrieve(d.id), 404, 'a deleted response');
    eq(gone.message, `Response with id '${d.id}' not found.`, "vLLM's not-found message");
    const unstored = await r.client.responses.create({ input: 'x', max_output_tokens: 2, store: false });
    eq(unstored.store, false, 'store false echoed');
    await refusedWith(r.client.responses.retrieve(unstored.id), 404, 'store false keeps nothing');
    for (const t of [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs'] }, { type: 'code_interpreter', container: { type: 'auto' } }, { type: 'mcp', server_label: 'x' }, { type: 'computer_use_preview', display_width: 1, display_height: 1, environment: 'linux' }]) {
      const e = await refusedWith(r.client.responses.create({ input: 'x', tools: [TOOL, t] }), 400, `tool ${t.type}`);
      eq(e.param, 'tools[1].type', `tool ${t.type}: names the field`);
      check(e.message.includes(`'${t.type}'`), `tool ${t.type}: names the type`);
    }
    const inc = await refusedWith(r.client.responses.create({ input: 'x', include: ['reasoning.encrypted_content'] }), 400, 'include');
    eq(inc.param, 'include', 'include refused by name');
    for (let i = 0; i < 6; i++) await r.client.responses.create({ input: `filler ${i}`, max_output_tokens: 4, min_tokens: 4 });
    const evicted = await refusedWith(r.client.responses.retrieve(q.id), 404, 'an evicted response');
    eq(evicted.message, `Response with id '${q.id}' not found.`, 'evicted: the not-found message');
    await refusedWith(r.client.responses.create({ input: 'x', previous_response_id: q.id }), 404, 'previous_response_id evicted');
    eq((await http(r.base, 'DELETE', '/v1/responses/resp_unknown')).status, 404, 'delete of an unknown id');
  } finally {
    await s.stop();
    await r.stop();
  }
}, 150000);
