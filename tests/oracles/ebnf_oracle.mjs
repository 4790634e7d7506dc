// Reference for the EBNF tests: asks xgrammar (@mlc-ai/web-xgrammar, xgrammar compiled to WASM)
// which strings a grammar accepts, for a grammar's original text and for our re-printed text.
//
//   node ebnf_oracle.mjs request.json > results.json
//
// request.json: {"cases": [{"name", "root", "grammars": {label: ebnf_text}, "strings": [...]}]}
// results.json: {name: {label: [accepted, ...] | {"error": message}}}
//
// Also the module regex_oracle.mjs loads xgrammar through (loadXgrammar, acceptStrings).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

// web-xgrammar is a UMD bundle that needs CommonJS globals; it sets globalThis.xgrammar. Its
// WASM module prints warnings through console.log: they go to stderr, stdout carries the answer.
export async function loadXgrammar() {
  console.log = (...args) => console.error(...args);
  globalThis.require = createRequire(import.meta.url);
  globalThis.__filename = fileURLToPath(import.meta.url);
  await import("@mlc-ai/web-xgrammar");
  return globalThis.xgrammar;
}

// [accepted per string] or {"error": ...} when xgrammar refuses the grammar. A WASM abort inside
// one grammar leaves the module usable for the next one.
export async function acceptStrings(xg, ebnf, root, strings) {
  let grammar;
  try {
    grammar = await xg.Grammar.fromEBNF(ebnf, root);
  } catch (e) {
    return { error: String(e?.message ?? e) };
  }
  const out = [];
  try {
    for (const s of strings) out.push(await xg.Testings.isGrammarAcceptString(grammar, s));
  } catch (e) {
    return { error: `matching: ${String(e?.message ?? e)}` };
  } finally {
    grammar.dispose?.();
  }
  return out;
}

async function main() {
  const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const xg = await loadXgrammar();
  const results = {};
  for (const c of request.cases) {
    results[c.name] = {};
    for (const [label, text] of Object.entries(c.grammars))
      results[c.name][label] = await acceptStrings(xg, text, c.root ?? "root", c.strings);
  }
  process.stdout.write(JSON.stringify(results));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
