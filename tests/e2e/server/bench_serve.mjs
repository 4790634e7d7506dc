// `nanovllm bench-serve` against a live CPU server: a random dataset with Poisson arrivals and a
// JSONL dataset give the request and token counts the server itself counts (/metrics), well-formed
// latency distributions and the same JSON on stdout and in --result-json; bad flags exit 2 with a
// line naming them, and an unreachable server is an error, not a hang.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

function bench(args) {
  return new Promise((resolve) => {
    const p = spawn(BIN, ['bench-serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out, err }); });
  });
}

function lastJson(out) {
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

run(async () => {
  const s = await startServer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nanovllm-bench-serve-'));
  try {
    const m0 = await metrics(s.base);
    const resultFile = path.join(tmp, 'result.json');
    const r = await bench(['--base-url', s.base, '--num-prompts', '12', '--request-rate', '40', '--random-input-len', '20',
      '--random-output-len', '5', '--random-vocab-size', '1000', '--seed', '3', '--result-json', resultFile]);
    eq(r.code, 0, `bench-serve exits 0 (stderr: ${r.err})`);
    check(r.out.includes('Serving Benchmark Result') && r.out.includes('P99 ITL (ms):'), 'the table is printed');
    const j = lastJson(r.out);
    eq([j.completed, j.failed, j.model], [12, 0, MODEL], 'every request completed, model from /v1/models');
    eq([j.total_input_tokens, j.total_output_tokens], [12 * 20, 12 * 5], 'token totals');
    const m1 = await metrics(s.base);
    eq(m1['vllm:generation_tokens_total'] - m0['vllm:generation_tokens_total'], 60, 'the server generated what we counted');
    eq(m1['vllm:prompt_tokens_total'] - m0['vllm:prompt_tokens_total'], 240, 'the server read what we sent');
    for (const k of ['ttft', 'tpot', 'itl', 'e2el']) {
      const v = ['mean', 'median', 'p90', 'p99'].map((q) => j[`${q}_${k}_ms`]);
      // Events read in one receive share a timestamp, so on this fast tiny model ITL and TPOT may be 0.
      check(v.every((x) => Number.isFinite(x) && (x > 0 || ((k === 'itl' || k === 'tpot') && x === 0))), `${k}: figures ${v}`);
      check(j[`median_${k}_ms`] <= j[`p90_${k}_ms`] && j[`p90_${k}_ms`] <= j[`p99_${k}_ms`], `${k}: median <= p90 <= p99`);
    }
    check(j.median_ttft_ms <= j.median_e2el_ms, 'the first token comes before the end');
    check(j.duration > 0 && Math.abs(j.output_throughput - 60 / j.duration) < 1e-6 * j.output_throughput, 'throughput = tokens / duration');
    eq(JSON.parse(fs.readFileSync(resultFile, 'utf8')), j, '--result-json holds the printed JSON');

    // Streaming is timed as it arrives: with 64 tokens per request the first comes long before the
    // last (a client that waited to fill its read buffer saw them all at once: TTFT = E2EL).
    const r3 = await bench(['--base-url', s.base, '--num-prompts', '2', '--random-input-len', '8', '--random-output-len', '64',
      '--random-vocab-size', '1000']);
    eq(r3.code, 0, `64-token run exits 0 (stderr: ${r3.err})`);
    const j3 = lastJson(r3.out);
    check(j3.median_ttft_ms < 0.5 * j3.median_e2el_ms, `TTFT ${j3.median_ttft_ms} ms well before the end ${j3.median_e2el_ms} ms`);
    check(j3.mean_itl_ms > 0, `tokens arrive spread out (mean ITL ${j3.mean_itl_ms} ms)`);

    // JSONL: text and token-id prompts, per-line max_tokens, cycled to --num-prompts, all at once.
    const data = path.join(tmp, 'requests.jsonl');
    fs.writeFileSync(data, `${JSON.stringify({ prompt: 'Hello there', max_tokens: 3 })}\n\n${JSON.stringify({ prompt: [1, 2, 3], max_tokens: 4 })}\n`);
    const r2 = await bench(['--base-url', s.base, '--dataset-name', 'jsonl', '--dataset-path', data, '--num-prompts', '4',
      '--model', MODEL, '--max-concurrency', '2']);
    eq(r2.code, 0, `jsonl run exits 0 (stderr: ${r2.err})`);
    const j2 = lastJson(r2.out);
    eq([j2.completed, j2.total_output_tokens, j2.request_rate, j2.max_concurrency], [4, 14, 'inf', 2], 'jsonl counts');

    // Mistakes: one line, exit 2.
    for (const [args, re] of [
      [['--request-rate', '0'], /--request-rate must be positive/],
      [['--base-url', 'https://127.0.0.1:1'], /https is not supported/],
      [['--base-url', 'http://127.0.0.1:99999'], /port must be a number in 1\.\.65535/],
      [['--dataset-name', 'sharegpt', '--model', MODEL], /--dataset-name must be random or jsonl/],
      [['--dataset-name', 'jsonl', '--dataset-path', path.join(tmp, 'missing.jsonl'), '--model', MODEL], /cannot open/],
      [['--random-range-ratio', '1.5', '--model', MODEL], /--random-range-ratio must be in \[0, 1\)/],
    ]) {
      const base = args.includes('--base-url') ? [] : ['--base-url', s.base];
      const e = await bench([...base, '--num-prompts', '1', ...args]);
      eq(e.code, 2, `${args.join(' ')} exits 2`);
      check(re.test(e.err) && e.err.trim().split('\n').length === 1, `${args.join(' ')}: one line ${JSON.stringify(e.err)}`);
    }
    // Nobody listening: /v1/models cannot be read (exit 2); with --model every request fails (exit 1).
    const closed = 'http://127.0.0.1:9';
    const n1 = await bench(['--base-url', closed, '--num-prompts', '2']);
    check(n1.code === 2 && /GET http:\/\/127\.0\.0\.1:9\/v1\/models/.test(n1.err), `unreachable server named: ${n1.err}`);
    const n2 = await bench(['--base-url', closed, '--num-prompts', '2', '--model', MODEL, '--random-input-len', '4']);
    check(n2.code === 1 && /every request failed/.test(n2.err), `all requests failed: ${n2.err}`);
    eq(lastJson(n2.out).failed, 2, 'failures counted');
    check(s.alive(), 'server alive');
  } finally {
    await s.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
