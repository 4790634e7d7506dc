// HTTP framing and transport abuse, over raw sockets: every request gets a prompt, definite answer
// (never a silent drop or a hang), bodies are bounded whatever their transfer encoding, and
// smuggling-prone framing is refused. The server stays up and idle afterwards.
import net from 'node:net';
import { MODEL, check, eq, metrics, run, startServer } from './harness.mjs';

const LIMIT = 65536;

// Writes `chunks` (strings or Buffers) to a fresh connection and collects everything the server
// sends until it closes the connection or `ms` pass. Write errors after the server has answered
// and closed (a refused upload) are expected and ignored.
function exchange(port, chunks, ms = 5000) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const parts = [];
    const t0 = Date.now();
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ text: Buffer.concat(parts).toString('latin1'), closed, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), ms);
    sock.on('data', (d) => parts.push(d));
    sock.on('error', () => {});
    sock.on('close', () => finish(true));
    sock.on('connect', async () => {
      for (const c of chunks) {
        if (sock.destroyed) return;
        if (!sock.write(c)) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
      }
    });
  });
}

const statuses = (text) => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
const post = (path, body, headers = {}) => {
  const h = { host: 'x', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers };
  return `POST ${path} HTTP/1.1\r\n${Object.entries(h).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}`;
};
const TOK = JSON.stringify({ prompt: 'Hello world' });

run(async () => {
  const s = await startServer(['--max-body-bytes', String(LIMIT), '--keep-alive-timeout', '2']);
  try {
    // A chunked upload far past the limit is cut off with 413 (it used to be read whole).
    const chunk = `${(16384).toString(16)}\r\n${'x'.repeat(16384)}\r\n`;
    let r = await exchange(s.port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      ...Array.from({ length: 64 }, () => chunk), '0\r\n\r\n']);
    eq(statuses(r.text), [413], 'chunked body over the limit');
    check(r.text.includes(`limit of ${LIMIT} bytes`), 'chunked 413 names the limit');
    check(r.closed, 'connection closed after the 413');
    // A chunked body within the limit is read.
    const body = JSON.stringify({ prompt: 'Hi there' });
    r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
      `${(5).toString(16)}\r\n${body.slice(0, 5)}\r\n`, `${(body.length - 5).toString(16)}\r\n${body.slice(5)}\r\n`, '0\r\n\r\n']);
    eq(statuses(r.text), [200], 'chunked body within the limit');
    check(r.text.includes('"tokens"'), 'chunked /tokenize answered');

    // Conflicting Content-Length headers (request smuggling behind a proxy): 400.
    r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${TOK.length}\r\nContent-Length: 3\r\n\r\n${TOK}`]);
    eq(statuses(r.text), [400], 'conflicting Content-Length');
    // Content-Length together with chunked: 400.
    r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`]);
    eq(statuses(r.text), [400], 'Content-Length with Transfer-Encoding');
    // A Transfer-Encoding other than chunked (read as "no body", its bytes would run as a second
    // request), or given twice: 400 and close (RFC 9112 6.3). The bytes after it never run.
    for (const te of ['gzip', 'identity', 'xchunked', 'chunked, gzip']) {
      r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${te}\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n`]);
      eq(statuses(r.text), [400], `Transfer-Encoding: ${te}`);
      check(r.closed && r.text.includes('only chunked'), `Transfer-Encoding: ${te} closes and names chunked`);
    }
    r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`]);
    eq(statuses(r.text), [400], 'Transfer-Encoding twice');
    // Host: exactly one for HTTP/1.1 (RFC 9112 3.2); several are refused for any version.
    r = await exchange(s.port, ['GET /health HTTP/1.1\r\n\r\n']);
    eq(statuses(r.text), [400], 'HTTP/1.1 without Host');
    check(r.text.includes('Host'), 'missing Host named');
    r = await exchange(s.port, ['GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n']);
    eq(statuses(r.text), [400], 'two Host headers');
    // A negative Content-Length is malformed (400), not too large (413).
    r = await exchange(s.port, [post('/tokenize', TOK, { 'content-length': -1 })]);
    eq(statuses(r.text), [400], 'Content-Length -1');

    // Pipelined requests are all answered, in order.
    r = await exchange(s.port, [post('/tokenize', TOK) + 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' +
      post('/tokenize', JSON.stringify({ prompt: 'second' }), { connection: 'close' })]);
    eq(statuses(r.text), [200, 200, 200], 'three pipelined requests');
    check(r.text.indexOf('"count":2') < r.text.lastIndexOf('"count":1'), 'pipelined answers in order');

    // Bytes after a NUL are part of the body: the body is not valid JSON.
    r = await exchange(s.port, [post('/tokenize', `${TOK}\u0000{"garbage": 1}`, { connection: 'close' })]);
    eq(statuses(r.text), [400], 'NUL and trailing bytes in the body');
    check(r.text.includes('not valid JSON'), 'NUL body names the problem');

    // A malformed request line is answered at once, not after a timeout.
    for (const [line, status] of [['GARBAGE\r\n\r\n', 400], ['GET\u0000 / HTTP/1.1\r\n\r\n', 400],
      ['POST /tokenize HTTP/1.1\r\nBad Header\r\n\r\n', 400], ['GET /health HTTP/9.9\r\n\r\n', 400]]) {
      r = await exchange(s.port, [line]);
      eq(statuses(r.text), [status], `malformed request ${JSON.stringify(line)}`);
      check(r.ms < 1000, `malformed request answered in ${r.ms} ms`);
    }
    // Headers past the limit: 431.
    r = await exchange(s.port, [`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100000)}\r\n\r\n`]);
    eq(statuses(r.text), [431], 'oversized headers');
    // A request that never completes is dropped after --keep-alive-timeout (2 s here).
    r = await exchange(s.port, [`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pro`], 6000);
    check(r.closed && r.ms >= 1500 && r.ms < 4000, `incomplete request closed after the timeout (${r.ms} ms)`);
    // An idle keep-alive connection is closed without a word.
    r = await exchange(s.port, [], 6000);
    check(r.closed && r.text === '' && r.ms >= 1500 && r.ms < 4000, `idle connection closed (${r.ms} ms)`);
    // HTTP/1.0: answered, then closed.
    r = await exchange(s.port, ['GET /health HTTP/1.0\r\n\r\n']);
    check(/^HTTP\/1\.0 200/.test(r.text) && r.closed, 'HTTP/1.0 request answered and closed');

    // POST bodies must be JSON: forms and text (what a web page can send without a CORS preflight) get 415.
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', null]) {
      r = await exchange(s.port, [post('/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 1 }), { 'content-type': ct, connection: 'close' })]);
      eq(statuses(r.text), [415], `Content-Type ${ct}`);
      check(r.text.includes('application/json'), '415 says what to send');
    }
    r = await exchange(s.port, [post('/tokenize', TOK, { 'content-type': 'Application/JSON; charset=utf-8', connection: 'close' })]);
    eq(statuses(r.text), [200], 'JSON media type with parameters, any case');
    // Unknown method on a known route.
    r = await exchange(s.port, ['DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    eq(statuses(r.text), [405], 'DELETE /v1/models');

    check(s.alive(), 'server alive');
    eq((await fetch(`${s.base}/health`)).status, 200, 'healthy');
    const m = await metrics(s.base);
    eq([m['vllm:num_requests_running'], m['vllm:num_requests_waiting'], m['nanovllm:kv_cache_blocks_used']], [0, 0, 0], 'idle');
  } finally {
    await s.stop();
  }
});
