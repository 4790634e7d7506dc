// Reference renderer for the chat-template tests: renders templates with @huggingface/jinja.
//
//   node render_template.mjs request.json > results.json
//
// request.json: {"templates": {name: source}, "cases": [{name, messages, tools?,
//   add_generation_prompt?, enable_thinking?, bos_token?, eos_token?, extra?}]}
// results.json: {template_name: {case_name: {"ok": text} | {"error": message}}}
//
// The variables are exactly those our C++ ChatTemplate::render sets: messages, tools (null when
// absent), add_generation_prompt (default true), bos_token/eos_token (default ""),
// enable_thinking only when given, then `extra` on top. Object keys keep their order (the C++
// side uses nlohmann::ordered_json, as transformers keeps Python dict order).
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

function contextOf(c) {
  const ctx = {
    messages: c.messages ?? [],
    tools: c.tools ?? null,
    add_generation_prompt: c.add_generation_prompt ?? true,
    bos_token: c.bos_token ?? "",
    eos_token: c.eos_token ?? "",
  };
  if (c.enable_thinking !== undefined && c.enable_thinking !== null) ctx.enable_thinking = c.enable_thinking;
  Object.assign(ctx, c.extra ?? {});
  return ctx;
}

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = {};
for (const [name, source] of Object.entries(request.templates)) {
  results[name] = {};
  let tpl;
  try {
    tpl = new Template(source);
  } catch (e) {
    for (const c of request.cases) results[name][c.name] = { error: `parse: ${e.message}` };
    continue;
  }
  for (const c of request.cases) {
    try {
      results[name][c.name] = { ok: tpl.render(contextOf(c)) };
    } catch (e) {
      results[name][c.name] = { error: String(e.message) };
    }
  }
}
process.stdout.write(JSON.stringify(results));
