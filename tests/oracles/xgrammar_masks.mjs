// Mask oracle: replays token walks through xgrammar (@mlc-ai/web-xgrammar, the C++ library in
// WebAssembly) and compares its allowed-token bitmask at every step with ours.
//   node xgrammar_masks.mjs REQUEST.json   -> JSON on stdout
// REQUEST: {tokenizer_json, vocab_size, stop_ids, cases: [{name, kind: "ebnf" | "json_schema",
//   text, any_whitespace, steps: [{token, hash, count}]}]} where hash/count describe our mask
//   before `token` (hash: mask_hash below over the 32-bit words, as hex).
// Answer: {cases: {name: {compared, mismatches: [{step, count, words_b64}], rejected_at, error}}}:
// a mismatch carries xgrammar's whole mask so the test can list the differing tokens.
import { createRequire } from "module";
import fs from "fs";

globalThis.require = createRequire(import.meta.url);
globalThis.__filename = new URL(import.meta.url).pathname;
console.log = () => {};  // xgrammar prints its warnings with console.log: they must not mix with the answer
console.error = () => {};
await import("@mlc-ai/web-xgrammar");
const xg = globalThis.xgrammar;

// Two 32-bit FNV-1a hashes over the words' little-endian bytes (offset bases differ), as hex.
export function maskHash(words) {
  let a = 0x811c9dc5, b = 0x01000193 ^ 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    const w = words[i] >>> 0;
    for (let k = 0; k < 4; k++) {
      const byte = (w >>> (8 * k)) & 0xff;
      a = Math.imul(a ^ byte, 0x01000193) >>> 0;
      b = Math.imul(b ^ byte, 0x01000193) >>> 0;
    }
  }
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0");
}

function popcount(words) {
  let n = 0;
  for (let i = 0; i < words.length; i++) {
    let w = words[i] >>> 0;
    while (w) { w &= w - 1; n++; }
  }
  return n;
}

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const tj = JSON.parse(fs.readFileSync(req.tokenizer_json, "utf8"));
const V = req.vocab_size;
const vocab = new Array(V).fill("");
for (const [t, id] of Object.entries(tj.model.vocab)) if (id < V) vocab[id] = t;
// Special tokens as empty strings: xgrammar then treats them as special (never allowed by a
// grammar), as our Vocabulary does; added tokens that are not special match as their content.
for (const a of tj.added_tokens) if (a.id < V) vocab[a.id] = a.special ? "" : a.content;
const info = await xg.TokenizerInfo.createTokenizerInfo(vocab, "byte_level", false, V, req.stop_ids);
const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
const out = { cases: {} };
for (const c of req.cases) {
  const r = { compared: 0, mismatches: [], rejected_at: null, error: null };
  out.cases[c.name] = r;
  let cg;
  try {
    cg = c.kind === "json_schema"
      ? await compiler.compileJSONSchema(c.text, c.any_whitespace, -1, undefined, true)
      : await compiler.compileGrammar(c.text, "root");
  } catch (e) {
    r.error = String(e && e.message ? e.message : e);
    continue;
  }
  const m = await xg.GrammarMatcher.createGrammarMatcher(cg);
  for (let i = 0; i < c.steps.length; i++) {
    const words = await m.getNextTokenBitmask();
    r.compared++;
    if (maskHash(words) !== c.steps[i].hash) {
      r.mismatches.push({ step: i, count: popcount(words),
        words_b64: Buffer.from(new Uint32Array(words).buffer).toString("base64") });
      if (r.mismatches.length >= 60) break;
    }
    if (c.steps[i].token < 0) break;
    if (!m.acceptToken(c.steps[i].token)) { r.rejected_at = i; break; }
  }
  m.dispose();
  cg.dispose();
}
process.stdout.write(JSON.stringify(out));
