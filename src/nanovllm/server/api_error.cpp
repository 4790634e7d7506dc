#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

namespace {
std::string type_of(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 408: return "timeout_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}
}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_)
    : Error(std::move(message)), status(status_), type(type_of(status_)), param(std::move(param_)),
      code(std::move(code_)) {}

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e = {{"message", what()}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return nlohmann::ordered_json{{"error", e}};
}

ApiError ApiError::from(const UserError& e) {
  if (auto* ir = dynamic_cast<const InvalidRequest*>(&e)) return ApiError(400, ir->what(), ir->param, "invalid_value");
  return ApiError(400, e.what(), "", "invalid_request");
}

}  // namespace nanovllm::server
