// Validity oracle for generated outputs (tests/unit/frontend/test_structured_validity.cpp):
//   node ajv_validate.mjs request.json -> {"results": [[{"json": bool, "valid": bool, "error": "..."}]]}
// request: {"cases": [{"schema": {...}, "texts": ["...", ...]}]}: each text is JSON.parse'd and
// validated by ajv (2020-12 dialect, strict off) against its case's schema, formats asserted with
// @hyperjump/json-schema-formats' checks (as json_schema_oracle.mjs does).
import { readFileSync } from "node:fs";

const { default: Ajv2020 } = await import("ajv/dist/2020.js");
const F = await import("@hyperjump/json-schema-formats");
const formats = { date: F.isDate, time: F.isTime, "date-time": F.isDateTime, email: F.isEmail, ipv4: F.isIPv4,
                  ipv6: F.isIPv6, uri: F.isUri, hostname: F.isHostname, uuid: F.isUuid };
const ajv = new Ajv2020({ strict: false, validateFormats: true, logger: false });
for (const [name, fn] of Object.entries(formats))
  ajv.addFormat(name, { type: "string", validate: (s) => { try { return fn(s); } catch { return false; } } });

const req = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = req.cases.map((c) => {
  const validate = ajv.compile(c.schema);
  return c.texts.map((t) => {
    let v;
    try { v = JSON.parse(t); } catch (e) { return { json: false, valid: false, error: String(e.message).slice(0, 120) }; }
    const ok = validate(v);
    return { json: true, valid: !!ok, error: ok ? "" : ajv.errorsText(validate.errors).slice(0, 200) };
  });
});
process.stdout.write(JSON.stringify({ results }));
