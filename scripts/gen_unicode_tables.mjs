// Regenerates src/nanovllm/tokenizer/unicode_data.cpp: the Unicode tables that our tokenizer must
// share with Hugging Face tokenizers, read off the oracle itself (npm `tokenizers`, the Rust
// library, installed under tests/oracles by scripts/setup.sh):
//   - the general category of every code point as its regexes see it (Oniguruma's tables:
//     Unicode 16.0 with tokenizers 0.23.2), probed with \p{Xx} for each category;
//   - what \s, \w, \d, \h and \v match there (Oniguruma's Ruby syntax: \h is a hex digit, \v
//     U+000B), as categories plus extra code points;
//   - the code points that its normalizers do not know (they follow Unicode 9.0) although a newer
//     Unicode decomposes, composes or reorders them: those are left alone by NFC/NFD/NFKC/NFKD.
//     Found by comparing each normalization form with node's ICU on probes around every code
//     point.
// Usage: node scripts/gen_unicode_tables.mjs   (about a minute; run it after updating the oracle)
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..");
const require = createRequire(path.join(root, "tests/oracles/package.json"));
const tk = require("tokenizers");
const version = require("tokenizers/package.json").version;

const CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"];
const isSurrogate = (c) => c >= 0xD800 && c <= 0xDFFF;
const codePoints = [];
for (let c = 0; c <= 0x10FFFF; ++c) if (!isSurrogate(c)) codePoints.push(c);
const everything = codePoints.map((c) => String.fromCodePoint(c)).join("");

// The code points that `regex` matches one at a time: split with behavior Removed, and what is
// left (offsets in code points) is what did not match.
async function matches(regex) {
  const tok = tk.Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: null, post_processor: null,
    pre_tokenizer: { type: "Split", pattern: { Regex: regex }, behavior: "Removed", invert: false },
    decoder: null, model: { type: "WordLevel", vocab: { "[UNK]": 0 }, unk_token: "[UNK]" } }));
  const kept = new Uint8Array(codePoints.length);
  for (const [a, b] of (await tok.encode(everything, null, { addSpecialTokens: false })).getOffsets())
    for (let i = a; i < b; ++i) kept[i] = 1;
  return new Set(codePoints.filter((_, i) => !kept[i]));
}

const ranges = (sorted) => {
  const out = [];
  for (const c of sorted) {
    if (out.length && out.at(-1)[1] === c - 1) out.at(-1)[1] = c;
    else out.push([c, c]);
  }
  return out;
};
const hex = (c) => "0x" + c.toString(16).toUpperCase();

// General categories: every code point must fall in exactly one.
const category = new Int8Array(0x110000).fill(-1);
const members = {};
for (const [i, name] of CATEGORIES.entries()) {
  if (name === "Cs") {  // not representable in a JS string / UTF-8: all surrogates
    for (let c = 0xD800; c <= 0xDFFF; ++c) category[c] = i;
    members[name] = new Set();
    continue;
  }
  members[name] = await matches(`\\p{${name}}`);
  for (const c of members[name]) {
    if (category[c] !== -1) throw new Error(`U+${c.toString(16)} is in ${CATEGORIES[category[c]]} and ${name}`);
    category[c] = i;
  }
}
for (const c of codePoints) if (category[c] === -1) throw new Error(`U+${c.toString(16)} has no category`);
const runs = [];
for (let c = 0; c <= 0x10FFFF; ++c) if (c === 0 || category[c] !== category[c - 1]) runs.push([c, category[c]]);

// Escapes: the categories wholly inside (large ones only) plus the remaining code points.
const escapes = {};
for (const e of ["s", "w", "d", "h", "v"]) {
  const set = await matches(`\\${e}`);
  let mask = 0;
  const extra = [];
  for (const [i, name] of CATEGORIES.entries())
    if (members[name].size > 64 && [...members[name]].every((c) => set.has(c))) mask |= 1 << i;
  for (const c of [...set].sort((a, b) => a - b)) if (!(mask & (1 << category[c]))) extra.push(c);
  escapes[e] = { mask, extra: ranges(extra) };
}

// Normalization: code points whose probes come out differently from HF's normalizers and ICU's.
// HF leaves them alone (it does not know them), so they cut the text into independently
// normalized parts. A new composition (ICU composes a pair that HF does not) needs one part of
// the pair treated so: a part that is new itself, or else one that is a plain starter to HF (no
// decomposition, combining class 0) and takes part in no composition HF knows.
const forms = ["NFC", "NFD", "NFKC", "NFKD"];
const hfForms = { NFC: tk.nfcNormalizer(), NFD: tk.nfdNormalizer(), NFKC: tk.nfkcNormalizer(), NFKD: tk.nfkdNormalizer() };
const probesOf = (s) => [s, "\u0345" + s, s + "\u0334", "a\u0301" + s + "\u0316"];  // ccc 240 before, ccc 1 after
const inert = new Set();
const batch = 1 << 16;
for (let start = 0; start < codePoints.length; start += batch) {
  const cps = codePoints.slice(start, start + batch).filter((c) => c !== 0x0A);  // "\n" separates probes
  const probes = cps.flatMap((c) => probesOf(String.fromCodePoint(c)));
  for (const form of forms) {
    const hf = hfForms[form].normalizeString(probes.join("\n")).split("\n");
    if (hf.length !== probes.length) throw new Error("probe split mismatch");
    for (let i = 0; i < probes.length; ++i)
      if (hf[i] !== probes[i].normalize(form)) inert.add(cps[Math.floor(i / 4)]);
  }
}
const partsOf = (c) => [...String.fromCodePoint(c).normalize("NFD")].map((p) => p.codePointAt(0));
const isPrimaryComposite = (c) => {
  const s = String.fromCodePoint(c);
  return !(c >= 0xAC00 && c <= 0xD7A3) && s.normalize("NFD") !== s && s.normalize("NFD").normalize("NFC") === s;
};
const knownParts = new Set();
for (const c of codePoints) if (!inert.has(c) && isPrimaryComposite(c)) for (const p of partsOf(c)) knownParts.add(p);
const plainStarter = (p) => {
  const s = String.fromCodePoint(p);
  return s.normalize("NFKD") === s && ("\u0345" + s).normalize("NFD") === "\u0345" + s &&
         (s + "\u0334").normalize("NFD") === s + "\u0334";
};
for (const c of [...inert].filter(isPrimaryComposite)) {
  const parts = partsOf(c);
  if (parts.some((p) => inert.has(p))) continue;
  const free = parts.filter((p) => plainStarter(p) && !knownParts.has(p));
  if (!free.length) throw new Error(`U+${c.toString(16)}: no part of its decomposition can be left alone`);
  inert.add(free[0]);
}

const wrap = (items, indent) => {
  const lines = [];
  let line = "";
  for (const it of items) {
    if (line.length + it.length + 2 > 110 - indent.length) { lines.push(line); line = ""; }
    line += (line ? " " : "") + it + ",";
  }
  if (line) lines.push(line);
  return lines.map((l) => indent + l).join("\n");
};
const escapeEntries = Object.entries(escapes).map(([e, { mask, extra }]) => {
  const name = `k${e.toUpperCase()}`;
  if (!extra.length) return `constexpr EscapeSet ${name} = {${hex(mask)}, {}};`;
  return `constexpr Range ${name}Extra[] = {\n${wrap(extra.map(([a, b]) => `{${hex(a)}, ${hex(b)}}`), "    ")}\n};\n` +
         `constexpr EscapeSet ${name} = {${hex(mask)}, ${name}Extra};`;
});

const cpp = `// GENERATED by scripts/gen_unicode_tables.mjs from Hugging Face tokenizers ${version} (npm): do not edit.
// clang-format off
// Regenerate with \`node scripts/gen_unicode_tables.mjs\` after updating the oracle in tests/oracles.
#include "nanovllm/tokenizer/unicode_data.h"

namespace nanovllm::unicode {
namespace {

constexpr CategoryRun kRuns[] = {
${wrap(runs.map(([c, i]) => `{${hex(c)}, ${CATEGORIES[i]}}`), "    ")}
};

${escapeEntries.join("\n")}

constexpr Range kInert[] = {
${wrap(ranges([...inert].sort((a, b) => a - b)).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`), "    ")}
};

}  // namespace

const char* oracle_version() { return "Hugging Face tokenizers ${version}"; }
std::span<const CategoryRun> category_runs() { return kRuns; }
const EscapeSet* escape_set(char letter) {
  switch (letter) {
${Object.keys(escapes).map((e) => `    case '${e}': return &k${e.toUpperCase()};`).join("\n")}
    default: return nullptr;
  }
}
std::span<const Range> normalization_inert() { return kInert; }

}  // namespace nanovllm::unicode
`;
const out = path.join(root, "src/nanovllm/tokenizer/unicode_data.cpp");
writeFileSync(out, cpp);
console.log(`${out}: ${runs.length} category runs, ${[...inert].length} code points unknown to the normalizers; ` +
  Object.entries(escapes).map(([e, { mask, extra }]) => `\\${e}: mask ${hex(mask)} + ${extra.length} ranges`).join(", "));
