// OpenAI-style API errors as vLLM sends them: an HTTP status plus {"error": {"message", "type",
// "param", "code"}}, where type is vLLM's error name ("BadRequestError", "NotFoundError", ...) and
// code the HTTP status (vLLM's ErrorInfo.code is an int).
// Handlers throw ApiError; the HTTP layer turns it into the response, so every failure of one
// request stays with that request.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm::server {

struct ApiError : Error {
  ApiError(int status, std::string message, std::string param = "", std::string code = "");
  int status;
  std::string type;   // derived from the status: BadRequestError, NotFoundError, ...
  std::string param;  // the offending field, or empty
  std::string code;   // the reason in a word (e.g. "model_not_found") for the code; not sent (vLLM sends the status)

  nlohmann::ordered_json to_json() const;
  // 400 for an InvalidRequest (its param), 400 for other UserErrors.
  static ApiError from(const UserError& e);
};

}  // namespace nanovllm::server
