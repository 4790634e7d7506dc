// OpenAI-style API errors: an HTTP status plus {"error": {"message", "type", "param", "code"}}.
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
  std::string type;   // derived from the status: invalid_request_error, authentication_error, ...
  std::string param;  // the offending field, or empty
  std::string code;   // machine-readable reason (e.g. "model_not_found"), or empty

  nlohmann::ordered_json to_json() const;
  // 400 for an InvalidRequest (its param), 400 for other UserErrors.
  static ApiError from(const UserError& e);
};

}  // namespace nanovllm::server
