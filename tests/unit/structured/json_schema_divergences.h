// Explained disagreements for test_json_schema_oracle.cpp, by case name (draft4/<file>/<group> for
// the JSON-Schema-Test-Suite, ours/<name> for tests/fixtures/json_schemas/schemas.json). An entry
// that no longer matches any disagreement fails the test, so the tables stay exact.
#pragma once
#include <map>
#include <string>

namespace nanovllm::structured::test {

namespace reason {
inline const char* kOneOf = "oneOf is treated as anyOf (as xgrammar does): a value matching several branches passes";
inline const char* kNoType = "xgrammar ignores the keywords of a schema without `type` (any value passes)";
inline const char* kBranchType = "xgrammar does not apply the parent's `type` inside anyOf/oneOf branches";
inline const char* kAllOf = "xgrammar's allOf merge drops constraints of the branches (required, bounds, lengths)";
inline const char* kTuple = "xgrammar aborts on draft-4 array-form `items` / `additionalItems`";
inline const char* kPrefixShort =
    "xgrammar requires every prefixItems entry; JSON Schema (and ours) allow a shorter array";
inline const char* kDupKey =
    "xgrammar lets an additional key repeat a listed property name, so its schema is skipped; ours excludes "
    "listed names from additional keys";
inline const char* kEnumSeparators =
    "xgrammar writes enum/const objects and arrays without spaces ({\"x\":[1,2]}); ours uses the grammar's "
    "\", \" / \": \" separators";
inline const char* kEnumSiblings = "xgrammar keeps enum values that the sibling keywords (type, maxLength) exclude";
inline const char* kIntRange = "xgrammar's integer range grammar is wrong (3..120 accepts 121-129; max -7 accepts -6)";
inline const char* kNumberRange =
    "xgrammar's number range grammar is wrong (a wildcard for the decimal point, "
    "fraction digits capped), so it accepts and refuses the wrong numbers";
inline const char* kLengthEscapes =
    "xgrammar forbids escape sequences in strings with minLength/maxLength; ours "
    "counts an escape as one character";
inline const char* kRefSiblings = "xgrammar ignores keywords beside `$ref`";
inline const char* kFormat =
    "xgrammar's format grammar differs from RFC 3339 / 5321 / 3986 / 1123 here (ours "
    "follows @hyperjump/json-schema-formats)";
}  // namespace reason

// Our grammar vs ajv.
inline const std::map<std::string, std::string> kOursVsAjv = {
    {"draft4/oneOf/0", reason::kOneOf},
    {"draft4/oneOf/1", reason::kOneOf},
    {"ours/format_date_time",
     "leap seconds (:60) are refused: the reference allows them only on the days that "
     "had one, which no grammar of ours tracks (tighter)"},
};

// @hyperjump/json-schema vs ajv.
inline const std::map<std::string, std::string> kHyperVsAjv = {
    {"draft4/ref/4",
     "hyperjump's draft-04 reads an object with `$ref` as a pure reference, so `definitions` "
     "beside the root `$ref` is unreachable and it errors; the suite and ajv say valid"},
    {"ours/nullable_openapi",
     "`nullable` is OpenAPI 3.0: ajv implements it, JSON Schema 2020-12 (hyperjump) "
     "ignores it; we follow ajv and vLLM users' OpenAPI-style schemas"},
};

// Our grammar vs xgrammar's own grammar for the same schema (or xgrammar refusing the schema).
inline const std::map<std::string, std::string> kOursVsXgrammar = {
    {"draft4/additionalItems/0", reason::kTuple},
    {"draft4/additionalItems/2", reason::kTuple},
    {"draft4/additionalItems/4", reason::kTuple},
    {"draft4/items/1", reason::kTuple},
    {"draft4/ref/2", reason::kTuple},
    {"draft4/ref/3", "xgrammar aborts on $ref pointers with escapes (~0, ~1, %25)"},
    {"ours/ref_escaped_pointer", "xgrammar aborts on $ref pointers with escapes (~0, ~1, %25)"},
    {"ours/object_escaped_keys", "xgrammar aborts on property names that need JSON escapes (a quote)"},
    {"ours/int_fraction_bounds", "xgrammar aborts on non-integer bounds for an integer (1.5 <= x <= 4.5)"},
    {"draft4/allOf/0", reason::kAllOf},
    {"draft4/allOf/1", reason::kAllOf},
    {"draft4/allOf/2", reason::kAllOf},
    {"draft4/anyOf/0", reason::kNoType},
    {"draft4/oneOf/0", reason::kNoType},
    {"draft4/anyOf/1", reason::kBranchType},
    {"draft4/oneOf/1", reason::kBranchType},
    {"draft4/items/0", "xgrammar makes a schema with `items` array-only; JSON Schema lets other types pass"},
    {"draft4/maxItems/0", reason::kNoType},
    {"draft4/minItems/0", reason::kNoType},
    {"draft4/maxLength/0", reason::kNoType},
    {"draft4/minLength/0", reason::kNoType},
    {"draft4/maximum/0", reason::kNoType},
    {"draft4/maximum/1", reason::kNoType},
    {"draft4/minimum/0", reason::kNoType},
    {"draft4/minimum/1", reason::kNoType},
    {"draft4/pattern/0", reason::kNoType},
    {"draft4/format/0", reason::kNoType},
    {"draft4/format/1", reason::kNoType},
    {"draft4/format/2", reason::kNoType},
    {"draft4/format/3", reason::kNoType},
    {"draft4/format/4", reason::kNoType},
    {"draft4/format/5", reason::kNoType},
    {"draft4/properties/0", reason::kDupKey},
    {"draft4/ref/1", reason::kDupKey},
    {"draft4/ref/0", "xgrammar makes a schema with `properties` object-only; JSON Schema lets other types pass"},
    {"ours/object_additional_true", reason::kDupKey},
    {"ours/additional_schema_and_listed_prefix", reason::kDupKey},
    {"ours/object_required_unlisted", "xgrammar ignores `required` names that `properties` does not list"},
    {"ours/nested_objects", "xgrammar does not enforce maxItems on this nested array"},
    {"ours/array_prefix_items", reason::kPrefixShort},
    {"ours/array_prefix_closed", reason::kPrefixShort},
    {"ours/array_prefix_open", reason::kPrefixShort},
    {"ours/string_lengths", reason::kLengthEscapes},
    {"ours/enum_mixed", reason::kEnumSeparators},
    {"ours/const_object", reason::kEnumSeparators},
    {"ours/enum_filtered_by_type", reason::kEnumSiblings},
    {"ours/enum_filtered_by_length", reason::kEnumSiblings},
    {"ours/int_range", reason::kIntRange},
    {"ours/int_max_only", reason::kIntRange},
    {"ours/number_unit_interval", reason::kNumberRange},
    {"ours/number_exclusive_zero", reason::kNumberRange},
    {"ours/number_decimal_bounds", reason::kNumberRange},
    {"ours/number_negative_only", reason::kNumberRange},
    {"ours/pydantic_model", reason::kNumberRange},
    {"ours/nullable_openapi", "xgrammar does not know OpenAPI's `nullable`"},
    {"ours/anyof_with_parent", "xgrammar does not merge the parent's properties into anyOf branches"},
    {"ours/allof_merge", reason::kAllOf},
    {"ours/allof_additional_false", reason::kAllOf},
    {"ours/allof_string_constraints", reason::kAllOf},
    {"ours/allof_number_bounds", reason::kAllOf},
    {"ours/ref_recursive_tree", "xgrammar loses `required` of a recursively referenced schema"},
    {"ours/ref_with_siblings", reason::kRefSiblings},
    {"ours/format_date", "xgrammar's date accepts 02-29 in common years and day 31 in 30-day months"},
    {"ours/format_time", "xgrammar refuses the lowercase `z` RFC 3339 allows"},
    {"ours/format_date_time", "xgrammar refuses the lowercase `t` / `z` RFC 3339 allows"},
    {"ours/format_email", reason::kFormat},
    {"ours/format_ipv4", "xgrammar accepts octets with leading zeros (01.2.3.4)"},
    {"ours/format_uri", reason::kFormat},
    {"ours/format_hostname", "xgrammar does not bound labels to 63 characters"},
    {"ours/event_log", "xgrammar accepts null for additionalProperties {type: [string, number, boolean]}"},
};

}  // namespace nanovllm::structured::test
