// Internal to the JSON Schema converter (json_schema.h): a schema position reduced to one Node, the
// conjunction of every keyword that applies there. `allOf` and `$ref` (with its siblings) are merged
// into one Node, so the emitter (json_schema.cpp) sees plain per-type constraints; `anyOf` / `oneOf`
// stay as groups of alternatives that the emitter distributes (each alternative merged with the
// rest). Sub-schemas of properties and items are kept as Conjunctions (lists of schema pointers), so
// a recursive `$ref` becomes a reference to the rule of that conjunction instead of an expansion.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/json_schema.h"

namespace nanovllm::structured::detail {

using ojson = nlohmann::ordered_json;

// One schema (object or boolean) at a JSON pointer of the document ("" is the root).
struct Conjunct {
  std::string ptr;
  const ojson* schema = nullptr;
};
// Schemas that all apply at one position; sorted by pointer, no duplicates. Empty: any value.
using Conjunction = std::vector<Conjunct>;
void add_conjunct(Conjunction& c, Conjunct x);
std::string conjunction_key(const Conjunction& c);

// JSON types as a bit set; "number" is integer | fraction (a number that is not an integer).
enum TypeBit : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64,
  kNumber = kInteger | kFraction,
  kAllTypes = 127,
};

// An exact decimal: sign, integer digits without leading zeros ("" for 0), fraction digits without
// trailing zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits, frac_digits;
  static Decimal from_json(const ojson& v);  // v is a number
  bool is_integer() const { return frac_digits.empty(); }
  std::string str() const;
};
int compare(const Decimal& a, const Decimal& b);

struct NumBound {
  Decimal value;
  bool exclusive = false;
};

// The constraints at one position. Unset fields constrain nothing.
struct Node {
  std::string ptr;  // where the constraints come from (for error messages)
  uint8_t types = kAllTypes;
  std::optional<std::vector<ojson>> values;  // enum / const (intersected)
  // strings
  int64_t min_length = 0, max_length = -1;
  std::optional<std::string> pattern, format;
  std::string pattern_ptr, format_ptr;
  // numbers
  std::optional<NumBound> lo, hi;
  // arrays: prefixItems (or draft-4 array-form items), then `items` (nullopt: not given)
  std::vector<Conjunction> prefix;
  std::optional<Conjunction> items;
  bool has_array_keyword = false;
  int64_t min_items = 0, max_items = -1;
  // objects: properties in schema order; additionalProperties (nullopt: not given)
  std::vector<std::pair<std::string, Conjunction>> props;
  std::vector<std::string> required;
  std::optional<Conjunction> additional;
  bool has_object_keyword = false;
  // anyOf / oneOf not yet distributed: each group is a list of alternatives, one of which holds
  std::vector<std::vector<Conjunction>> groups;
};

// The schema document and what is shared while converting it.
struct SchemaDoc {
  const ojson* root = nullptr;
  JsonSchemaOptions opt;
  bool refs_ignore_siblings = false;  // draft-04/06/07 `$schema`: keywords beside `$ref` are ignored
};

// The Node of a conjunction: every keyword of every schema merged; `$ref` and `allOf` resolved.
// Throws GrammarError naming the keyword and its pointer when a keyword is unsupported, malformed,
// or cannot be merged (two different `pattern`s).
Node build_node(const SchemaDoc& doc, const Conjunction& c);
// a := a AND b.
void merge_nodes(Node& a, const Node& b);
// The schema at a local reference ("#", "#/$defs/x", JSON-pointer escapes and %-escapes decoded).
Conjunct resolve_ref(const SchemaDoc& doc, const std::string& ref, const std::string& at);

// What applies to an object's properties beyond its listed ones, and to an array's items beyond its
// prefix: the schema's additionalProperties / items, else nothing in strict mode (when the schema
// lists properties or prefix items; a bare {"type": "object"} is any object, as in xgrammar), else
// any value. A result holding the "#false" conjunct allows nothing.
Conjunction additional_conj(const SchemaDoc& doc, const Node& n);
Conjunction extra_items_conj(const SchemaDoc& doc, const Node& n);
bool allows_nothing(const Conjunction& c);

// The conjunction with each schema that is only a `$ref` (plus annotations) replaced by its target,
// so that equal schemas reached by different references share one rule.
Conjunction follow_pure_refs(const SchemaDoc& doc, const Conjunction& c);
// A node that constrains nothing (every value passes).
bool is_trivial(const Node& n);

// Whether `v` satisfies the node (and its groups), as the emitted grammar would decide: used to
// keep only the enum / const values that the rest of the schema allows. Throws GrammarError when
// that needs a keyword it cannot check (a `pattern` or `format` beside `enum`).
bool node_accepts(const SchemaDoc& doc, const Node& n, const ojson& v, int depth = 0);
// JSON Schema length of a string: code points.
int64_t code_point_length(const std::string& s);

}  // namespace nanovllm::structured::detail
