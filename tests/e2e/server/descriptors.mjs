// Connections and descriptors (issue 44). --limit-concurrency: past it a new connection gets 503
// and is closed, /health is still answered, and a freed slot serves again. Out of descriptors
// (the server under `prlimit --nofile=64`): idle connections past the limit are answered 503
// through the descriptor kept in reserve, /health on a fresh connection is answered, the accept
// errors are logged a bounded number of times, and closing the connections restores service.
import net from 'node:net';
import { MODEL, check, eq, run, startServer } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// An idle connection: collects what the server sends; `closed` once it closes.
function idle(port) {
  const sock = net.connect(port, '127.0.0.1');
  const c = { sock, data: '', closed: false };
  sock.on('data', (d) => { c.data += d.toString('latin1'); });
  sock.on('error', () => {});
  sock.on('close', () => { c.closed = true; });
  c.ready = new Promise((r) => { sock.on('connect', r); sock.on('close', r); });
  return c;
}

// One request on a fresh connection, raw: the answer's text once the server closes or `ms` pass.
function ask(port, req, ms = 10000) {
  return new Promise((resolve) => {
    const c = idle(port);
    const t0 = Date.now();
    const timer = setTimeout(() => { c.sock.destroy(); resolve({ text: c.data, ms: Date.now() - t0, closed: false }); }, ms);
    c.sock.on('connect', () => c.sock.write(req));
    c.sock.on('close', () => { clearTimeout(timer); resolve({ text: c.data, ms: Date.now() - t0, closed: true }); });
    c.sock.on('data', () => { if (/\r\n\r\n/.test(c.data) && !/Connection: close/i.test(c.data) && /Content-Length: 0\r\n/i.test(c.data)) { clearTimeout(timer); c.sock.destroy(); resolve({ text: c.data, ms: Date.now() - t0, closed: false }); } });
  });
}

const HEALTH = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
const COMPLETION = (() => {
  const b = JSON.stringify({ model: MODEL, prompt: 'Hi', max_tokens: 2 });
  return `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${b.length}\r\n\r\n${b}`;
})();

run(async () => {
  // --limit-concurrency 4.
  {
    // The harness's kept-alive /health connection counts until the server closes it (idle 3 s).
    const s = await startServer(['--limit-concurrency', '4', '--keep-alive-timeout', '3']);
    try {
      await sleep(3300);
      const held = [];
      for (let i = 0; i < 4; i++) { held.push(idle(s.port)); await held[i].ready; }
      await sleep(200);
      const over = await ask(s.port, COMPLETION);
      check(over.text.startsWith('HTTP/1.1 503'), `past the limit: 503 (${over.text.slice(0, 40)})`);
      check(/too many connections/.test(over.text) && over.closed, 'the 503 says why and the connection closes');
      const h = await ask(s.port, HEALTH);
      check(h.text.startsWith('HTTP/1.1 200'), `past the limit /health is answered (${h.text.slice(0, 40)})`);
      held[0].sock.destroy();
      await sleep(200);
      const ok = await ask(s.port, COMPLETION);
      check(ok.text.startsWith('HTTP/1.1 200'), `a freed slot serves again (${ok.text.slice(0, 40)})`);
      for (const c of held) c.sock.destroy();
    } finally {
      await s.stop();
    }
  }
  // Out of descriptors.
  {
    const s = await startServer(['--keep-alive-timeout', '60'], { wrap: ['prlimit', '--nofile=64:64', '--'] });
    try {
      const held = [];
      for (let i = 0; i < 120; i++) held.push(idle(s.port));
      await Promise.all(held.map((c) => c.ready));
      await sleep(500);
      const h = await ask(s.port, HEALTH, 10000);
      check(h.text.startsWith('HTTP/1.1 200'), `out of descriptors, /health is answered (${JSON.stringify(h.text.slice(0, 60))} after ${h.ms} ms)`);
      check(h.ms < 5000, `/health answered in ${h.ms} ms`);
      const shed = held.filter((c) => c.data.startsWith('HTTP/1.1 503'));
      check(shed.length > 0 && shed.every((c) => /out of file descriptors/.test(c.data)), `connections past the descriptors get 503 (${shed.length})`);
      const errLines = (s.log().match(/accept failed/g) ?? []).length;
      check(errLines >= 1 && errLines <= 3, `accept errors logged a bounded number of times (${errLines} lines)`);
      check(s.alive(), 'the server is up');
      for (const c of held) c.sock.destroy();
      await sleep(300);
      const again = await ask(s.port, HEALTH, 3000);
      check(again.text.startsWith('HTTP/1.1 200') && again.ms < 1000, `/health within 1 s once connections are freed (${again.ms} ms)`);
      const ok = await ask(s.port, COMPLETION);
      check(ok.text.startsWith('HTTP/1.1 200'), `a completion is served again (${ok.text.slice(0, 40)})`);
    } finally {
      await s.stop();
    }
  }
}, 90000);
