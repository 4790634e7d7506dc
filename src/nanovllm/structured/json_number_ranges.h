// Exact numeric bounds as grammars (for the JSON Schema converter): the canonical JSON texts of the
// integers, or of the decimal numbers, inside a range. Built digit by digit (as xgrammar's integer
// ranges are), over arbitrary-length digit strings, so any bound the schema can write is exact.
#pragma once
#include <optional>

#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/json_schema_node.h"

namespace nanovllm::structured::detail {

// Integers written without leading zeros or "-0", within the bounds (nullopt: unbounded). Returns
// -1 when no integer is in range.
int32_t integer_range_expr(Grammar& g, const std::optional<NumBound>& lo, const std::optional<NumBound>& hi);

// Numbers written as -?int(.digits)? (no exponent: a tighter language than JSON's, so never a
// looser grammar) whose exact decimal value is within the bounds. -1 when none.
int32_t number_range_expr(Grammar& g, const std::optional<NumBound>& lo, const std::optional<NumBound>& hi);

}  // namespace nanovllm::structured::detail
