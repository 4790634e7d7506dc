// Reference checks for the JSON Schema converter (tests/unit/structured/test_json_schema_oracle.cpp).
//
//   node json_schema_oracle.mjs request.json > results.json
//
// request.json: {"cases": [{name, schema, dialect: "draft-04" | "2020-12", strict, any_whitespace,
//   ours: EBNF text | null (our converter refused), instances: [data...], samples: [text...],
//   checks: [text...]}]}
// For each case:
//   instances  serialized the way our grammar writes values (keys in the order the schema lists
//              them, ", " / ": " separators), then: ajv's verdict, @hyperjump/json-schema's verdict,
//              whether xgrammar accepts the text under our EBNF, and under xgrammar's own grammar
//              for the schema (Testings._jsonSchemaToEBNF(schema, any_whitespace, -1, undefined, strict)).
//   samples    texts generated from our grammar: JSON.parse + ajv (and xgrammar accepting our EBNF).
//   checks     raw texts: whether xgrammar accepts them under our EBNF.
// Both validators assert formats with @hyperjump/json-schema-formats' checks. For draft-04 schemas
// ajv (draft-07) gets a translated copy: boolean exclusiveMinimum/Maximum as numbers, keywords
// beside $ref dropped (draft-04 ignores them).
// web-xgrammar 0.1.27 mis-matches positive character classes with non-ASCII ranges ([\u4E00-\u9FA5]
// accepts "a" and refuses U+4E2D), while ASCII classes, non-ASCII literals and ASCII-only negated
// classes work ([^\x00-\x7F] is "any non-ASCII code point"). Our EBNF is rewritten for it: a class
// with non-ASCII ranges becomes ([its ASCII part] | [^\x00-\x7F]). Exact when the class holds every
// non-ASCII code point (JSON string characters); otherwise looser, and counted in "approximated".
// xgrammar (WebAssembly) aborts on some schemas and is unusable afterwards, so it runs in a worker
// thread that is replaced when it dies.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker, isMainThread, parentPort } from "node:worker_threads";

const here = new URL(".", import.meta.url).pathname;

if (!isMainThread) {
  globalThis.require = createRequire(here + "x.mjs");
  globalThis.__filename = here + "x.mjs";
  const origError = console.error;
  console.error = () => {};  // the module prints its whole source on abort
  await import("@mlc-ai/web-xgrammar");
  const xg = globalThis.xgrammar;
  const grammars = new Map();
  const hex = (c, w) => c.toString(16).toUpperCase().padStart(w, "0");
  const esc = (c) => (c <= 0xffff ? "\\u" + hex(c, 4) : "\\U" + hex(c, 8));
  // Reads one class element at text[i] (an escape or one code point): [code point, next index].
  const element = (t, i) => {
    if (t[i] !== "\\") { const c = t.codePointAt(i); return [c, i + (c > 0xffff ? 2 : 1)]; }
    const k = t[i + 1];
    const simple = { n: 10, t: 9, r: 13, "\\": 92, "]": 93, "[": 91, "^": 94, "-": 45, '"': 34, "/": 47, "0": 0 };
    if (k === "u" || k === "U") { const w = k === "u" ? 4 : 8; return [parseInt(t.substr(i + 2, w), 16), i + 2 + w]; }
    if (k === "x") { let j = i + 2; while (/[0-9a-fA-F]/.test(t[j])) ++j; return [parseInt(t.slice(i + 2, j), 16), j]; }
    return [simple[k] ?? k.codePointAt(0), i + 2];
  };
  let approximated = 0;
  const fixClasses = (text) => {
    let out = "", i = 0;
    while (i < text.length) {
      const ch = text[i];
      if (ch === '"') {  // a literal: copied as is
        let j = i + 1;
        while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
        out += text.slice(i, j + 1); i = j + 1; continue;
      }
      if (ch !== "[") { out += ch; ++i; continue; }
      let j = i + 1;
      const negated = text[j] === "^";
      if (negated) ++j;
      const ranges = [];
      while (text[j] !== "]") {
        let lo, hi;
        [lo, j] = element(text, j);
        hi = lo;
        if (text[j] === "-" && text[j + 1] !== "]") [hi, j] = element(text, j + 1);
        ranges.push([lo, hi]);
      }
      const original = text.slice(i, j + 1);
      i = j + 1;
      if (negated || !ranges.some(([, hi]) => hi > 0x7f)) { out += original; continue; }
      const ascii = ranges.filter(([lo]) => lo <= 0x7f).map(([lo, hi]) => [lo, Math.min(hi, 0x7f)]);
      let covered = 0;  // non-ASCII code points in the class, surrogates aside
      for (const [lo, hi] of ranges) if (hi > 0x7f) covered += hi - Math.max(lo, 0x80) + 1;
      if (covered !== 0x10ffff - 0x7f - 0x800) ++approximated;
      const parts = ascii.length ? ["[" + ascii.map(([lo, hi]) => esc(lo) + (hi > lo ? "-" + esc(hi) : "")).join("") + "]"] : [];
      parts.push("[^\\x00-\\x7F]");
      out += "(" + parts.join(" | ") + ")";
    }
    return out;
  };
  parentPort.on("message", async (job) => {
    try {
      let text = job.ebnf === undefined ? undefined : fixClasses(job.ebnf);
      if (job.schema !== undefined) {
        const key = JSON.stringify([job.schema, job.anyWs, job.strict]);
        if (!grammars.has(key))
          grammars.set(key, await xg.Testings._jsonSchemaToEBNF(job.schema, job.anyWs, -1, undefined, job.strict));
        text = grammars.get(key);
      }
      const g = await xg.Grammar.fromEBNF(text, "root");
      const out = [];
      for (const s of job.strings) out.push(await xg.Testings.isGrammarAcceptString(g, s));
      g.dispose();
      parentPort.postMessage({ ok: out, approximated });
      approximated = 0;
    } catch (e) {
      parentPort.postMessage({ error: String(e?.message ?? e).slice(0, 300) });
      origError("xgrammar worker failed");
      process.exit(1);
    }
  });
} else {
  const { default: Ajv } = await import("ajv");
  const { default: Ajv2020 } = await import("ajv/dist/2020.js");
  const Hyper04 = await import("@hyperjump/json-schema/draft-04");
  const Hyper2020 = await import("@hyperjump/json-schema/draft-2020-12");
  await import("@hyperjump/json-schema/formats");
  const F = await import("@hyperjump/json-schema-formats");
  Hyper2020.setShouldValidateFormat(true);

  const formats = { date: F.isDate, time: F.isTime, "date-time": F.isDateTime, email: F.isEmail, ipv4: F.isIPv4,
                    ipv6: F.isIPv6, uri: F.isUri, hostname: F.isHostname, uuid: F.isUuid };
  const addFormats = (ajv) => {
    for (const [name, fn] of Object.entries(formats))
      ajv.addFormat(name, { type: "string", validate: (s) => { try { return fn(s); } catch { return false; } } });
    return ajv;
  };

  // xgrammar jobs, one worker at a time, replaced when it dies.
  let worker = null, pending = null;
  const startWorker = () => {
    const w = new Worker(new URL(import.meta.url), { stderr: true, stdout: true });
    const retire = () => { if (worker === w) worker = null; };
    w.on("message", (m) => {
      if (m.error) retire(), w.terminate();  // its WebAssembly instance is unusable now
      const p = pending; pending = null; p?.(m);
    });
    w.on("exit", () => {
      if (worker !== w) return;  // retired already; its job was answered
      retire();
      const p = pending; pending = null; p?.({ error: "xgrammar worker exited" });
    });
    worker = w;
  };
  const xgRun = (job) => new Promise((resolve) => {
    if (!worker) startWorker();
    pending = resolve;
    worker.postMessage(job);
  });

  // draft-04 -> what ajv's draft-07 reads the same way.
  const toDraft7 = (s) => {
    if (Array.isArray(s)) return s.map(toDraft7);
    if (s === null || typeof s !== "object") return s;
    if (typeof s.$ref === "string") {
      const keep = { $ref: s.$ref };
      if (s.definitions) keep.definitions = toDraft7(s.definitions);
      return keep;
    }
    const out = {};
    for (const [k, v] of Object.entries(s)) {
      if (k === "$schema" || k === "id") continue;
      if ((k === "exclusiveMinimum" || k === "exclusiveMaximum") && typeof v === "boolean") continue;
      if (k === "enum" || k === "const") out[k] = v;
      else if (k === "properties" || k === "definitions" || k === "patternProperties" || k === "dependencies") {
        out[k] = {};
        for (const [n, sub] of Object.entries(v)) out[k][n] = toDraft7(sub);
      } else out[k] = toDraft7(v);
    }
    if (s.exclusiveMinimum === true && typeof s.minimum === "number") out.exclusiveMinimum = s.minimum, delete out.minimum;
    if (s.exclusiveMaximum === true && typeof s.maximum === "number") out.exclusiveMaximum = s.maximum, delete out.maximum;
    return out;
  };

  // --- serializing an instance the way our grammar orders it ---
  const pointer = (root, ptr) => {
    if (ptr === "" || ptr === "#") return root;
    let cur = root;
    for (const tok of decodeURIComponent(ptr.replace(/^#/, "")).split("/").slice(1)) {
      if (cur === undefined || cur === null) return undefined;
      cur = cur[tok.replaceAll("~1", "/").replaceAll("~0", "~")];
    }
    return cur;
  };
  // In-place schemas at one position (root of ref / allOf walk), in our merge order, and the
  // anyOf/oneOf groups met on the way.
  const walk = (root, ptrs, draft4) => {
    const done = new Set(), order = [], groups = [];
    const visit = (ptr) => {
      if (done.has(ptr)) return;
      done.add(ptr);
      const s = pointer(root, ptr);
      if (!s || typeof s !== "object") return;
      if (typeof s.$ref === "string" && s.$ref.startsWith("#")) {
        visit(s.$ref.slice(1));
        if (draft4) return;
      }
      order.push(s);
      if (Array.isArray(s.allOf)) s.allOf.forEach((_, i) => visit(`${ptr}/allOf/${i}`));
      for (const k of ["anyOf", "oneOf"])
        if (Array.isArray(s[k])) groups.push(s[k].map((_, i) => `${ptr}/${k}/${i}`));
    };
    [...ptrs].sort().forEach(visit);
    return { order, groups, done };
  };
  const escTok = (k) => k.replaceAll("~", "~0").replaceAll("/", "~1");
  const serialize = (root, ptrs, value, draft4, validAt) => {
    if (value === null || typeof value !== "object") return JSON.stringify(value);
    // Schemas in order: the in-place walk, then for each anyOf group the first branch that holds.
    let { order, groups, done } = walk(root, ptrs, draft4);
    const all = [...order];
    const ptrOf = new Map();
    const ptrsAll = [...done];
    while (groups.length) {
      const g = groups.shift();
      const pick = g.find((p) => validAt(p, value)) ?? g[0];
      const w = walk(root, [pick], draft4);
      all.push(...w.order);
      ptrsAll.push(...w.done);
      groups.push(...w.groups);
    }
    for (const p of ptrsAll) ptrOf.set(pointer(root, p), p);
    if (Array.isArray(value)) {
      return "[" + value.map((v, i) => {
        const sub = [];
        for (const s of all) {
          const p = ptrOf.get(s);
          const tuple = Array.isArray(s.prefixItems) ? "prefixItems" : Array.isArray(s.items) ? "items" : null;
          if (tuple && i < s[tuple].length) sub.push(`${p}/${tuple}/${i}`);
          else if (tuple === "items" && s.additionalItems !== undefined) sub.push(`${p}/additionalItems`);
          else if (s.items !== undefined && !Array.isArray(s.items)) sub.push(`${p}/items`);
        }
        return serialize(root, sub, v, draft4, validAt);
      }).join(", ") + "]";
    }
    const listed = [], required = [];
    for (const s of all) {
      for (const k of Object.keys(s.properties ?? {})) if (!listed.includes(k)) listed.push(k);
    }
    for (const s of all) for (const k of s.required ?? []) if (!listed.includes(k) && !required.includes(k)) required.push(k);
    const keys = [...listed.filter((k) => k in value), ...required.filter((k) => k in value)];
    for (const k of Object.keys(value)) if (!keys.includes(k)) keys.push(k);
    return "{" + keys.map((k) => {
      const sub = [];
      for (const s of all) {
        const p = ptrOf.get(s);
        if (s.properties && k in s.properties) sub.push(`${p}/properties/${escTok(k)}`);
        else if (s.additionalProperties !== undefined && typeof s.additionalProperties === "object")
          sub.push(`${p}/additionalProperties`);
      }
      return JSON.stringify(k) + ": " + serialize(root, sub, value[k], draft4, validAt);
    }).join(", ") + "}";
  };

  const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const results = {};
  let serial = 0;
  for (const c of request.cases) {
    const draft4 = c.dialect === "draft-04";
    const r = { instances: [], samples: [], checks: [] };
    results[c.name] = r;
    // ajv
    let ajvValidate = null, ajvAt = null;
    try {
      const ajv = addFormats(draft4 ? new Ajv({ strict: false, validateFormats: true, logger: false })
                                    : new Ajv2020({ strict: false, validateFormats: true, logger: false }));
      const s = draft4 ? toDraft7(c.schema) : structuredClone(c.schema);
      if (s && typeof s === "object") { delete s.$id; delete s.$schema; }
      const id = "urn:case:" + serial;
      ajv.addSchema(s, id);
      ajvValidate = ajv.getSchema(id);
      const cache = new Map();
      ajvAt = (ptr, v) => {
        try {
          if (!cache.has(ptr)) cache.set(ptr, ajv.compile({ $ref: id + "#" + ptr.split("/").map(encodeURIComponent).join("/") }));
          return !!cache.get(ptr)(v);
        } catch { return false; }
      };
    } catch (e) {
      r.ajv_error = String(e.message).slice(0, 200);
    }
    // hyperjump
    let hyper = null;
    try {
      const H = draft4 ? Hyper04 : Hyper2020;
      const uri = `https://oracle.test/case${serial++}`;
      const s = structuredClone(c.schema);
      if (s && typeof s === "object") { delete s.$id; delete s.id; delete s.$schema; }
      H.registerSchema(s, uri, draft4 ? "http://json-schema.org/draft-04/schema" : "https://json-schema.org/draft/2020-12/schema");
      hyper = await H.validate(uri);
    } catch (e) {
      r.hyper_error = String(e.message).slice(0, 200);
    }
    const texts = [];
    for (const data of c.instances) {
      const row = {};
      try {
        row.text = serialize(c.schema, [""], data, draft4, ajvAt ?? (() => false));
      } catch (e) {
        row.text = JSON.stringify(data);
      }
      if (ajvValidate) row.ajv = !!ajvValidate(data);
      if (hyper) {
        try { row.hyper = !!hyper(data).valid; } catch (e) { row.hyper_error = String(e.message).slice(0, 100); }
      }
      texts.push(row.text);
      r.instances.push(row);
    }
    for (const text of c.samples ?? []) {
      const row = { text };
      try {
        const v = JSON.parse(text);
        row.parsed = true;
        if (ajvValidate) row.ajv = !!ajvValidate(v);
      } catch {
        row.parsed = false;
      }
      r.samples.push(row);
    }
    if (c.ours) {
      const all = [...texts, ...(c.samples ?? []), ...(c.checks ?? [])];
      const m = await xgRun({ ebnf: c.ours, strings: all });
      if (m.error) r.ours_error = m.error;
      else {
        texts.forEach((_, i) => (r.instances[i].ours = m.ok[i]));
        (c.samples ?? []).forEach((_, i) => (r.samples[i].ours = m.ok[texts.length + i]));
        r.approximated_classes = m.approximated;
        r.checks = (c.checks ?? []).map((_, i) => m.ok[texts.length + (c.samples ?? []).length + i]);
      }
    }
    if (c.xgrammar !== false) {
      const m = await xgRun({ schema: JSON.stringify(c.schema), anyWs: !!c.any_whitespace, strict: !!c.strict, strings: texts });
      if (m.error) r.xgrammar_error = m.error;
      else texts.forEach((_, i) => (r.instances[i].xgrammar = m.ok[i]));
    }
  }
  worker?.terminate();
  process.stdout.write(JSON.stringify(results));
}
