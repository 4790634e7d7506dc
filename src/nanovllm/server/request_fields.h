// The request-field audit: every field of vLLM's ChatCompletionRequest / CompletionRequest
// (vllm/entrypoints/openai/protocol.py) is either implemented, or refused with a 400 naming it
// when set to anything but its default; fields outside vLLM's schema are ignored with a warning,
// as vLLM does. One table (request_fields.cpp) says which is which.
#pragma once
#include <string>
#include <vector>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// Throws ApiError(400, param = the field) for a field this server does not implement set to a
// non-default value. Returns the fields that are not in vLLM's schema for `ep` (to be ignored
// with a warning), in the body's order.
std::vector<std::string> audit_request_fields(const ojson& body, Endpoint ep);

}  // namespace nanovllm::server
