// Reference for the regex tests: for each pattern and string, whether JavaScript's RegExp matches
// the whole string (the meaning of the pattern) and whether xgrammar accepts it under the grammar
// our converter printed (what we would enforce).
//
//   node regex_oracle.mjs request.json > results.json
//
// request.json: {"cases": [{"name", "pattern", "js"?, "json": bool, "ebnf", "strings": [...]}]}
// ("js": the pattern in JavaScript's syntax when `pattern` is a Python-only spelling)
// results.json: {name: {"js": [matches, ...], "xg": [accepted, ...]} | {"error": message}}
//
// The JavaScript side runs `new RegExp("^(?:" + p + ")$", "u")` where p is the pattern with two
// documented readings of ours applied (our regex.h follows Python there): an unescaped `.` outside
// a class becomes [^\n] (JavaScript's `.` also leaves out \r, U+2028, U+2029), and (?P<name> becomes
// (?<name>. With "json": true the string is JSON string content: it matches when JSON.parse reads
// it, JSON.stringify writes it back byte for byte (the canonical escapes), and the decoded value
// matches the pattern.
import { readFileSync } from "node:fs";
import { loadXgrammar, acceptStrings } from "./ebnf_oracle.mjs";

function jsPattern(p) {
  let out = "";
  let inClass = false;
  for (let i = 0; i < p.length; ++i) {
    const c = p[i];
    if (c === "\\") {
      out += c + (p[i + 1] ?? "");
      ++i;
    } else if (inClass) {
      if (c === "]") inClass = false;
      out += c;
    } else if (c === "[") {
      inClass = true;
      out += c;
      if (p[i + 1] === "^") out += p[++i];
    } else if (c === ".") {
      out += "[^\\n]";
    } else if (c === "(" && p.startsWith("(?P<", i)) {
      out += "(?<";
      i += 3;
    } else {
      out += c;
    }
  }
  return out;
}

function jsonContentMatches(re, s) {
  let value;
  try {
    value = JSON.parse(`"${s}"`);
  } catch {
    return false;
  }
  return JSON.stringify(value) === `"${s}"` && re.test(value);
}

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const xg = await loadXgrammar();
const results = {};
for (const c of request.cases) {
  let re;
  try {
    re = new RegExp(`^(?:${jsPattern(c.js || c.pattern)})$`, "u");
  } catch (e) {
    results[c.name] = { error: `RegExp: ${e.message}` };
    continue;
  }
  const js = c.strings.map((s) => (c.json ? jsonContentMatches(re, s) : re.test(s)));
  const xgr = await acceptStrings(xg, c.ebnf, "root", c.strings);
  results[c.name] = Array.isArray(xgr) ? { js, xg: xgr } : { error: `xgrammar: ${xgr.error}` };
}
process.stdout.write(JSON.stringify(results));
