// A model without a tokenizer: `serve` refuses to start (one line, exit 2) unless asked for a
// token-ids-only server with --skip-tokenizer-init, whose responses then carry the generated
// token ids (streamed and not) and whose text prompts get a 400 naming the reason.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, MODEL, check, eq, run, startServer, writeTinyModel } from './harness.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };

run(async () => {
  const dir = writeTinyModel();
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.rmSync(path.join(dir, f));
  const refused = spawnSync(BIN, ['serve', '--model', dir, '--load-format', 'dummy', '--device', 'cpu', '--port', '0'], { encoding: 'utf8', timeout: 30000 });
  eq(refused.status, 2, 'serve without a tokenizer exits 2');
  check(/no tokenizer\.json for .*--skip-tokenizer-init/.test(refused.stderr) && refused.stderr.trim().split('\n').length === 1,
    `one line naming the way out: ${refused.stderr}`);

  const s = await startServer(['--skip-tokenizer-init'], { modelDir: dir });
  const c = s.client;
  try {
    const req = { model: MODEL, prompt: [1, 2, 3, 4], max_tokens: 6, temperature: 0, ignore_eos: true };
    const whole = await c.completions.create(req);
    const ids = whole.choices[0].token_ids;
    check(Array.isArray(ids) && ids.length === 6 && ids.every(Number.isInteger), `token_ids returned: ${JSON.stringify(ids)}`);
    eq(whole.choices[0].text, '', 'no text without a tokenizer');
    eq(whole.usage.completion_tokens, 6, 'usage');
    const streamed = [];
    for await (const ch of await c.completions.create({ ...req, stream: true })) streamed.push(...(ch.choices[0]?.token_ids ?? []));
    eq(streamed, ids, 'streamed token_ids equal the whole response');

    const text = await fetch(`${s.base}/v1/completions`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ ...req, prompt: 'hello' }) });
    eq(text.status, 400, 'a text prompt is refused');
    const err = (await text.json()).error;
    eq([err.code, err.type], [400, 'BadRequestError'], 'error code and type (vLLM: the status, the error name)');
    check(err.message.includes('--skip-tokenizer-init'), `message names the reason: ${err.message}`);
    check(s.alive(), 'server alive');
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
