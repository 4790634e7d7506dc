// JSON Schema `format` values as grammars of the string's content (the text between the quotes),
// built with the grammar builder: date, time, date-time (RFC 3339), uuid, email (RFC 5321
// mailbox), ipv4, ipv6, uri (RFC 3986), hostname (RFC 1123). Each follows the reference validators'
// definitions (@hyperjump/json-schema-formats), tighter only where noted in the .cpp.
#pragma once
#include <string>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

// The expression for the content of a string in `format` (rules named "json_fmt_*", shared when
// the grammar already has them). Throws GrammarError for a format it does not know.
int32_t add_string_format(Grammar& g, const std::string& format);

}  // namespace nanovllm::structured
