#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

namespace {
// vLLM's error types (its create_error_response's err_type, named after the HTTP status).
std::string type_of(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "UnauthorizedError";
    case 403: return "ForbiddenError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 408: return "RequestTimeoutError";
    case 413: return "PayloadTooLargeError";
    case 415: return "UnsupportedMediaTypeError";
    case 429: return "TooManyRequestsError";
    case 431: return "HeadersTooLargeError";
    case 501: return "NotImplementedError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}
}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_)
    : Error(std::move(message)), status(status_), type(type_of(status_)), param(std::move(param_)),
      code(std::move(code_)) {}

nlohmann::ordered_json ApiError::to_json() const {
  // vLLM's ErrorResponse: {"error": {message, type, param, code}} with the HTTP status as the code.
  nlohmann::ordered_json e = {{"message", what()}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (!param.empty()) e["param"] = param;
  return nlohmann::ordered_json{{"error", e}};
}

ApiError ApiError::from(const UserError& e) {
  if (auto* ir = dynamic_cast<const InvalidRequest*>(&e)) return ApiError(400, ir->what(), ir->param, "invalid_value");
  return ApiError(400, e.what(), "", "invalid_request");
}

}  // namespace nanovllm::server
