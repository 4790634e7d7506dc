// The structured-output side of a generation request: the body's fields (response_format,
// structured_outputs, guided_*: config/structured_request.h) or the grammar a tool_choice forces,
// and where the grammar starts for a reasoning model (structured_outputs.start_after_token).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// Sets r.params.structured_outputs and r.structured_field from `body`, or from `forced` (the tool
// choice's grammar; both at once is a 400), then the start token for every prompt of r (which must
// be tokenized). `reasoning`: the reasoning parser that splits this request's output (chat: none
// when enable_thinking is false); completions pass the server's --reasoning-parser.
void read_structured(const ojson& body, const ModelInfo& m, const StructuredOutputs& forced, bool chat,
                     const std::string& reasoning, GenerationRequest& r);

// The token after which the grammar applies, as vLLM's reasoning parsers decide (-1: from the first
// token): none without a reasoning parser, or with enable_in_reasoning; with one, the last of the
// parser's start / end tags in the prompt says whether the prompt left the reasoning open (its end
// tag's id) or closed it (enable_thinking=false writes "<think>\n\n</think>": -1). A prompt with
// neither: chat's answer opens its own reasoning (the end tag's id); a completion's is taken as no
// reasoning (-1: a plain prompt's output is constrained from the start, where vLLM would wait for a
// </think> that may never come).
int32_t structured_start_after(const ModelInfo& m, const std::string& reasoning, const std::vector<int32_t>& prompt,
                               bool chat);

// The 400 for a request the engine refused at admission (ApiError::from), except that a grammar the
// compiler cannot build (structured::GrammarError, or its InvalidRequest("structured_outputs"))
// names the request field that asked for it (`structured_field`: response_format, guided_json,
// tool_choice, ...) when there is one.
ApiError engine_refusal(const UserError& e, const std::string& structured_field);

}  // namespace nanovllm::server
