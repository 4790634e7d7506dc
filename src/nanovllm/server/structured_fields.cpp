#include "nanovllm/server/structured_fields.h"

#include "nanovllm/config/structured_request.h"
#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/structured/grammar.h"

namespace nanovllm::server {

int32_t structured_start_after(const ModelInfo& m, const std::string& reasoning, const std::vector<int32_t>& prompt,
                               bool chat) {
  if (reasoning.empty() || m.structured.enable_in_reasoning || !m.llm || !m.llm->tokenizer()) return -1;
  const output::ReasoningTags tags = output::reasoning_tags(reasoning);
  const Tokenizer& tok = *m.llm->tokenizer();
  const auto start = tok.token_to_id(tags.start), end = tok.token_to_id(tags.end);
  if (!end) return -1;  // the tag is no single token: the end of the reasoning cannot be seen
  for (auto it = prompt.rbegin(); it != prompt.rend(); ++it) {
    if (*it == *end) return -1;
    if (start && *it == *start) return *end;
  }
  return chat ? *end : -1;
}

void read_structured(const ojson& body, const ModelInfo& m, const StructuredOutputs& forced, bool chat,
                     const std::string& reasoning, GenerationRequest& r) {
  StructuredRequest sr;
  try {
    sr = read_structured_fields(body, m.structured);
  } catch (const InvalidRequest& e) {
    throw ApiError(400, e.what(), e.param, "invalid_value");
  }
  if (forced.active()) {
    if (sr.spec.active())
      throw ApiError(400,
                     "You can only either use constraints for structured outputs or tools, not both: tool_choice "
                     "constrains the output to tool calls, and " +
                         sr.field + " asks for another constraint",
                     sr.field, "invalid_value");
    sr.spec = forced;
    sr.field = "tool_choice";
  }
  if (!sr.spec.active()) return;
  // One start token for the request: its prompts agree on it unless a client mixes prompts that
  // closed the reasoning with prompts that did not (then the first prompt decides).
  sr.spec.start_after_token = r.prompts.empty() ? -1 : structured_start_after(m, reasoning, r.prompts[0], chat);
  r.params.structured_outputs = std::move(sr.spec);
  r.structured_field = std::move(sr.field);
}

ApiError engine_refusal(const UserError& e, const std::string& structured_field) {
  ApiError err = ApiError::from(e);
  const auto* ir = dynamic_cast<const InvalidRequest*>(&e);
  const bool grammar = dynamic_cast<const structured::GrammarError*>(&e) || (ir && ir->param == "structured_outputs");
  if (grammar && !structured_field.empty()) {
    err.param = structured_field;
    err.code = "invalid_value";
  }
  return err;
}

}  // namespace nanovllm::server
